// Command berth-engine serves the libpod-compatible container engine API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containers/storage/pkg/reexec"
)

func main() {
	// containers/storage re-executes this binary to apply layers.
	if reexec.Init() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-engine:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 2 for usage errors, 1 otherwise.
func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	return 1
}

// usageError is a bad flag or flag value.
type usageError struct{ error }
