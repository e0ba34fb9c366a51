package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// WatchExits calls onExit with a container ID each time conmon writes an
// exit file, until ctx ends. It returns once the watch is in place, so an
// exit that happens after WatchExits returns is never missed; exits from
// before must be found by scanning ExitDir. onExit("") means events may have
// been lost and the caller should rescan every container.
func (r *Runtime) WatchExits(ctx context.Context, onExit func(id string)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch exit files: %w", err)
	}
	if err := w.Add(r.exitDir); err != nil {
		w.Close()
		return fmt.Errorf("watch exit files in %s: %w", r.exitDir, err)
	}
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				// conmon writes ID.XXXXXX and renames it to ID: only the
				// final name counts.
				name := filepath.Base(ev.Name)
				if ev.Op&(fsnotify.Create|fsnotify.Write) != 0 && !strings.Contains(name, ".") {
					onExit(name)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				// Events may have been lost (queue overflow): ask for a rescan.
				r.logger.Warn("exit file watch", "err", err)
				onExit("")
			}
		}
	}()
	r.adoptPauses()
	return nil
}
