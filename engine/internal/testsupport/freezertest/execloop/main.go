// Command execloop execs itself again and again with a few threads
// running, as runc init does once when it starts a container's command: a
// cgroup v1 freeze that meets such an exec can stay FREEZING for ever.
// freezertest.StartExecLoop builds and starts it.
package main

import (
	"os"
	"syscall"
	"time"
)

func main() {
	for range 4 {
		go func() {
			for {
				time.Sleep(time.Microsecond)
			}
		}()
	}
	time.Sleep(time.Millisecond)
	syscall.Exec("/proc/self/exe", os.Args[:1], os.Environ())
	os.Exit(1)
}
