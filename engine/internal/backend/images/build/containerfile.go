package build

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/berth-project/berth/engine/internal/core"
)

// defaultContainerfiles are looked up in the context when none is named.
var defaultContainerfiles = []string{"Containerfile", "Dockerfile"}

// readContainerfiles reads the named files inside the context (several are
// concatenated, as Buildah does).
func readContainerfiles(files tree, contextDir string, names []string) ([]byte, error) {
	const field = "dockerfile"
	if len(names) == 0 {
		for _, name := range defaultContainerfiles {
			p, err := securejoin.SecureJoinVFS(contextDir, name, files)
			if err != nil {
				return nil, err
			}
			if fi, err := files.Lstat(p); err == nil && fi.Mode().IsRegular() {
				names = []string{name}
				break
			}
		}
		if len(names) == 0 {
			return nil, core.InvalidArgument(field, errors.New("the context has no Containerfile or Dockerfile"))
		}
	}
	var all bytes.Buffer
	for _, name := range names {
		if strings.Contains(name, "://") {
			return nil, core.InvalidArgument(field, fmt.Errorf("%q: Containerfiles given by URL are not supported", name))
		}
		rel := strings.TrimPrefix(path.Clean("/"+name), "/")
		p, err := securejoin.SecureJoinVFS(contextDir, rel, files)
		if err != nil {
			return nil, err
		}
		data, err := files.readFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, core.InvalidArgument(field, fmt.Errorf("%q is not in the build context", name))
		}
		if err != nil {
			return nil, core.InvalidArgument(field, fmt.Errorf("%q: %w", name, err))
		}
		all.Write(data)
		all.WriteByte('\n')
	}
	return all.Bytes(), nil
}

// parseContainerfile parses text into stages and the ARGs declared before
// the first FROM.
func parseContainerfile(text []byte) ([]instructions.Stage, []instructions.ArgCommand, error) {
	res, err := parser.Parse(bytes.NewReader(text))
	if err != nil {
		return nil, nil, core.InvalidArgument("dockerfile", err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, nil, core.InvalidArgument("dockerfile", err)
	}
	if len(stages) == 0 {
		return nil, nil, core.InvalidArgument("dockerfile", errors.New("no FROM instruction"))
	}
	return stages, metaArgs, nil
}

// argEnv is the set of variables ARG and ENV instructions define, in the
// form BuildKit's shell lexer reads them.
type argEnv map[string]string

// Get implements shell.EnvGetter.
func (e argEnv) Get(key string) (string, bool) { v, ok := e[key]; return v, ok }

// Keys implements shell.EnvGetter.
func (e argEnv) Keys() []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var _ shell.EnvGetter = argEnv(nil)

// globalArgs evaluates the ARGs before the first FROM with buildArgs.
func globalArgs(metaArgs []instructions.ArgCommand, buildArgs map[string]string) (argEnv, error) {
	lex := shell.NewLex(parser.DefaultEscapeToken)
	env := argEnv{}
	for _, cmd := range metaArgs {
		for _, kv := range cmd.Args {
			if v, ok := buildArgs[kv.Key]; ok {
				env[kv.Key] = v
				continue
			}
			if kv.Value == nil {
				continue
			}
			v, _, err := lex.ProcessWord(*kv.Value, env)
			if err != nil {
				return nil, core.InvalidArgument("dockerfile", err)
			}
			env[kv.Key] = v
		}
	}
	return env, nil
}

// stageIndex finds a stage by name (case-insensitive) or number among the
// first n stages; -1 when none.
func stageIndex(stages []instructions.Stage, n int, ref string) int {
	for i := 0; i < n; i++ {
		if stages[i].Name != "" && strings.EqualFold(stages[i].Name, ref) {
			return i
		}
	}
	if i, err := strconv.Atoi(ref); err == nil && i >= 0 && i < n {
		return i
	}
	return -1
}

// neededStages returns which of the stages up to target the target depends
// on (FROM another stage, COPY --from, RUN --mount from=).
func neededStages(stages []instructions.Stage, target int, fromRefs func(i int) []string) []bool {
	need := make([]bool, target+1)
	var mark func(i int)
	mark = func(i int) {
		if need[i] {
			return
		}
		need[i] = true
		for _, ref := range fromRefs(i) {
			if j := stageIndex(stages, i, ref); j >= 0 {
				mark(j)
			}
		}
	}
	mark(target)
	return need
}

// stageRefs lists the names a stage refers to: its base and the sources of
// COPY --from and RUN --mount from=. ARGs in them are expanded with args.
func stageRefs(st instructions.Stage, args argEnv) []string {
	lex := shell.NewLex(parser.DefaultEscapeToken)
	expand := func(s string) string {
		if v, _, err := lex.ProcessWord(s, args); err == nil {
			return v
		}
		return s
	}
	refs := []string{expand(st.BaseName)}
	for _, cmd := range st.Commands {
		switch c := cmd.(type) {
		case *instructions.CopyCommand:
			if c.From != "" {
				refs = append(refs, expand(c.From))
			}
		case *instructions.RunCommand:
			for _, m := range runMountsOf(c) {
				if m.From != "" {
					refs = append(refs, expand(m.From))
				}
			}
		}
	}
	return refs
}

// runMountsOf returns the --mount flags of a RUN.
func runMountsOf(c *instructions.RunCommand) []*instructions.Mount {
	return instructions.GetMounts(c)
}
