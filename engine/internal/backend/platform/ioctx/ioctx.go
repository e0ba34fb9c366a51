// Package ioctx ends a copy when its context ends: the engine's uploads
// and downloads (archives into and out of containers, image layers,
// artifact blobs) read and write through these, so a client that went
// away stops the copy at the next read or write instead of its end.
package ioctx

import (
	"context"
	"io"
)

// Reader reads from r until ctx ends, then fails with ctx's error.
func Reader(ctx context.Context, r io.Reader) io.Reader { return reader{ctx: ctx, r: r} }

// Writer writes to w until ctx ends, then fails with ctx's error.
func Writer(ctx context.Context, w io.Writer) io.Writer { return writer{ctx: ctx, w: w} }

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type writer struct {
	ctx context.Context
	w   io.Writer
}

func (c writer) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
