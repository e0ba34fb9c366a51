// Package cditest holds the CDI spec the CDI tests share: the backend's
// unit tests resolve it, the integration tests run containers with it.
package cditest

import (
	"fmt"
	"strings"
)

// Env is the variable every device of the example class sets.
const Env = "EXAMPLE_DEV=present"

// ExampleSpec is an example.com/dev class: two devices exposing the host's
// /dev/null and /dev/zero under other names (/dev/xnull, /dev/xzero), and
// edits every device of the class brings: Env, a read-only bind mount of
// share at /opt/example, and a createRuntime hook running hook: its path,
// then its argv (argv[0] included) when there is more than the path.
func ExampleSpec(share string, hook ...string) string {
	args := ""
	if len(hook) > 1 {
		quoted := make([]string, len(hook)-1)
		for i, a := range hook[1:] {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		args = "\n    args: [" + strings.Join(quoted, ", ") + "]"
	}
	return fmt.Sprintf(`cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: "null"
  containerEdits:
    deviceNodes:
    - path: /dev/xnull
      hostPath: /dev/null
- name: zero
  containerEdits:
    deviceNodes:
    - path: /dev/xzero
      hostPath: /dev/zero
      permissions: rw
containerEdits:
  env:
  - %s
  mounts:
  - hostPath: %s
    containerPath: /opt/example
    options: [ro, bind]
  hooks:
  - hookName: createRuntime
    path: %s%s
`, Env, share, hook[0], args)
}
