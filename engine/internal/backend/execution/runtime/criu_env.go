package runtime

import (
	"log/slog"
	"sync"
)

// criuNoBreakpoints is CRIU's switch (its fault injection 130,
// FI_NO_BREAKPOINTS) that has it follow a process through the end of its
// parasite and restorer code by tracing system calls instead of with a
// hardware breakpoint.
const criuNoBreakpoints = "CRIU_FAULT=130"

// criuEnv is what the environment of a runtime that runs CRIU (runc
// checkpoint, conmon's runc restore) adds for this machine: CRIU (4.1.1
// and before) sets an x86 debug-register breakpoint where its code
// injected into a container's process returns to the process, and waits
// for the process to stop there. Some hypervisors do not honour guests'
// debug registers (seen on an AMD EPYC virtual machine with kernel 6.18):
// the process runs on and CRIU waits for ever, the dump never ends. The
// probe (probeBreakpoints) runs once; where breakpoints do not stop a
// process, CRIU is told to trace system calls, a few milliseconds more.
var criuEnv = sync.OnceValue(func() []string {
	ok, err := probeBreakpoints()
	switch {
	case err != nil:
		slog.Warn("could not probe whether hardware breakpoints work; CRIU keeps using them", "err", err)
		return nil
	case !ok:
		slog.Info("hardware breakpoints do not stop a traced process on this machine; CRIU traces system calls instead")
		return []string{criuNoBreakpoints}
	}
	return nil
})
