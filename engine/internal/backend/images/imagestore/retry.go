package imagestore

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

// retrying runs op, and again up to r.Retries times, r.RetryDelay apart,
// while it fails for a reason another try may meet (core.Retryable); each
// new try is announced on progress (nil: nowhere) as "WHAT failed,
// retrying in DELAY (i/N): ERROR".
func retrying(ctx context.Context, r core.TransferRetries, progress io.Writer, what string, op func() error) error {
	for try := 0; ; try++ {
		err := op()
		if err == nil || try >= r.Retries || !core.Retryable(err) {
			return err
		}
		if progress != nil {
			fmt.Fprintf(progress, "%s failed, retrying in %s (%d/%d): %v\n", what, r.RetryDelay, try+1, r.Retries, err)
		}
		select {
		case <-time.After(r.RetryDelay):
		case <-ctx.Done():
			return err
		}
	}
}
