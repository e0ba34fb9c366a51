// Package sizelimit bounds how much a client's upload may expand to on the
// engine's disk. A 135 KB zstd stream can decompress to gigabytes, and a
// gzip layer inside an archive to more: every place that writes what a
// client sent (image load and import, build contexts, volume import,
// artifacts) reads it through a Budget, which stops the copy with a
// core.ErrTooLarge (413) once the bound is passed and with the request
// context's error once the client has gone.
package sizelimit

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/containers/image/v5/pkg/compression"

	"github.com/berth-project/berth/engine/internal/core"
)

// DefaultMax is the engine's default bound (--max-expanded-size): larger
// than any image a host runs, small enough that a bomb cannot fill a disk.
const DefaultMax int64 = 16 << 30

// ExceededError is what a Budget's readers return once more than Max bytes
// were charged. It is a core.ErrTooLarge.
type ExceededError struct {
	// What names the content ("archive", "layers", "tarball", "volume archive" ...).
	What string
	// Max is the bound in bytes.
	Max int64
}

// Error names the content and the bound, and how an operator changes it.
func (e *ExceededError) Error() string {
	return fmt.Sprintf("%s expands to more than %s, the engine's limit (--max-expanded-size)", e.What, FormatSize(e.Max))
}

// Is makes errors.Is(err, core.ErrTooLarge) true.
func (e *ExceededError) Is(target error) bool { return target == core.ErrTooLarge }

// Budget counts bytes against a bound. It is safe for concurrent use, so
// parallel readers (layers copied side by side) may share one.
type Budget struct {
	what string
	max  int64
	used atomic.Int64
}

// New returns a budget of max bytes for content named what. A max of zero
// or less is DefaultMax: a caller cannot end up unbounded by forgetting to
// configure it.
func New(max int64, what string) *Budget {
	if max <= 0 {
		max = DefaultMax
	}
	return &Budget{what: what, max: max}
}

// Max is the bound in bytes.
func (b *Budget) Max() int64 { return b.max }

// Used is how many bytes were charged so far.
func (b *Budget) Used() int64 { return b.used.Load() }

// Charge counts n bytes; past the bound it returns an *ExceededError (and
// keeps doing so).
func (b *Budget) Charge(n int64) error {
	if b.used.Add(n) > b.max {
		return &ExceededError{What: b.what, Max: b.max}
	}
	return nil
}

// Reader returns a reader of r that charges every byte it returns and fails
// once the budget is exceeded, or once ctx is done (with ctx's error), so a
// copy stops within one read of a client disconnecting.
func (b *Budget) Reader(ctx context.Context, r io.Reader) io.Reader {
	return &reader{ctx: ctx, r: r, budget: b}
}

type reader struct {
	ctx    context.Context
	r      io.Reader
	budget *Budget
	err    error
}

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return 0, err
	}
	// Never read much more than the bound allows: one byte over is enough
	// to know it is exceeded.
	if left := r.budget.max - r.budget.used.Load() + 1; left < int64(len(p)) {
		if left <= 0 {
			left = 1
		}
		p = p[:left]
	}
	n, err := r.r.Read(p)
	if cerr := r.budget.Charge(int64(n)); cerr != nil {
		r.err = cerr
		return 0, cerr
	}
	return n, err
}

// Decompress returns the decompressed content of r (gzip, zstd, xz or
// bzip2, detected from its first bytes; anything else passes through as
// is), read through b.Reader: b bounds the expanded size, and LimitRatio
// its expansion.
func (b *Budget) Decompress(ctx context.Context, r io.Reader) (io.ReadCloser, error) {
	src := Count(r)
	rc, compressed, err := compression.AutoDecompress(src)
	if err != nil {
		return nil, core.InvalidArgument(b.what, fmt.Errorf("detecting compression: %w", err))
	}
	var out io.Reader = rc
	if compressed {
		out = LimitRatio(rc, src, b.what)
	}
	return readCloser{Reader: b.Reader(ctx, out), Closer: rc}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Copy copies src to dst through b.Reader and returns the bytes copied.
func (b *Budget) Copy(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	return io.Copy(dst, b.Reader(ctx, src))
}

// MeasureTar reads the tar archive r and charges each regular entry at the
// size it expands to: an entry that is itself a compressed stream (a layer
// blob of an image archive) is decompressed to measure it, any other at its
// header's size. Nothing is written; it is the check to run before handing
// an archive to code that unpacks it without a bound.
func (b *Budget) MeasureTar(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return core.InvalidArgument(b.what, fmt.Errorf("not a valid tar archive: %w", err))
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Size == 0 {
			continue
		}
		if err := b.MeasureStream(ctx, tr, hdr.Size); err != nil {
			return err
		}
	}
}

// MeasureStream charges what the stream r of size bytes expands to: a
// compressed stream is decompressed (and discarded) to measure it, and
// refused early when it expands past MaxRatio (LimitRatio); anything else
// is charged at size.
func (b *Budget) MeasureStream(ctx context.Context, r io.Reader, size int64) error {
	src := Count(r)
	algo, decompressor, stream, err := compression.DetectCompressionFormat(src)
	if err != nil {
		return core.InvalidArgument(b.what, fmt.Errorf("detecting compression: %w", err))
	}
	if decompressor == nil {
		return b.Charge(size)
	}
	rc, err := decompressor(stream)
	if err != nil {
		return core.InvalidArgument(b.what, fmt.Errorf("%s stream: %w", algo.Name(), err))
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, b.Reader(ctx, LimitRatio(rc, src, b.what))); err != nil {
		if errors.Is(err, core.ErrTooLarge) || ctx.Err() != nil {
			return err
		}
		return core.InvalidArgument(b.what, fmt.Errorf("%s stream: %w", algo.Name(), err))
	}
	return nil
}

// ParseSize reads a size in bytes: a plain number, or one with a binary
// suffix (K, M, G, T, optionally followed by "iB" or "B"; "16G", "512MiB").
// It must be positive.
func ParseSize(s string) (int64, error) {
	text := strings.TrimSpace(s)
	upper := strings.ToUpper(text)
	upper = strings.TrimSuffix(upper, "IB")
	upper = strings.TrimSuffix(upper, "B")
	shift := 0
	if n := len(upper); n > 0 {
		switch upper[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift > 0 {
			upper = upper[:n-1]
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(upper), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with K, M, G or T", s)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n << shift, nil
}

// FormatSize writes n bytes in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift int
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// MaxRatio is how many times its compressed size a stream may expand to,
// once it has expanded to RatioFloor: more than gzip can reach at all
// (about 1,032:1), so no gzip stream is ever refused by it, while a zstd
// stream of zeros (a 135 KB body that expands to the 16 GiB bound took 7 s
// to refuse by size alone) is refused within a few hundred megabytes.
const MaxRatio = 4096

// RatioFloor is what a stream may expand to before MaxRatio applies: small
// streams of zeros (an empty file system image, padding) stay legal.
const RatioFloor int64 = 64 << 20

// RatioError is a stream that expanded past MaxRatio times its compressed
// size. It is a core.ErrTooLarge.
type RatioError struct {
	What                 string
	Expanded, Compressed int64
}

// Error names the content, its expansion and what bound it passed.
func (e *RatioError) Error() string {
	return fmt.Sprintf("%s expands more than %d times its compressed size (%d bytes from %d: a decompression bomb)", e.What, MaxRatio, e.Expanded, e.Compressed)
}

// Is makes errors.Is(err, core.ErrTooLarge) true.
func (e *RatioError) Is(target error) bool { return target == core.ErrTooLarge }

// Counter counts the bytes read through it: the compressed side of a
// stream whose expansion LimitRatio bounds.
type Counter struct {
	r io.Reader
	n atomic.Int64
}

// Count returns a Counter reading r.
func Count(r io.Reader) *Counter { return &Counter{r: r} }

func (c *Counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// LimitRatio returns a reader of the decompressed stream r that fails with
// a *RatioError once more than RatioFloor bytes came out at more than
// MaxRatio times the bytes read from compressed (what r decompresses). The
// refusal comes as the stream is read, long before a size bound would.
func LimitRatio(r io.Reader, compressed *Counter, what string) io.Reader {
	return &ratioReader{r: r, compressed: compressed, what: what}
}

type ratioReader struct {
	r          io.Reader
	compressed *Counter
	what       string
	expanded   int64
	err        error
}

func (r *ratioReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.r.Read(p)
	r.expanded += int64(n)
	if r.expanded > RatioFloor {
		if in := r.compressed.n.Load(); r.expanded > MaxRatio*max(in, 1) {
			r.err = &RatioError{What: r.what, Expanded: r.expanded, Compressed: in}
			return 0, r.err
		}
	}
	return n, err
}
