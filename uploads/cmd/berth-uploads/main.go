// Command berth-uploads serves the uploads API (/v1/uploads) and processes finished
// uploads into the engine. See docs/uploads.md.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "berth-uploads:", err)
		os.Exit(1)
	}
}
