package checkpointarchive

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
)

// BenchmarkWriteRead64MiB: a checkpoint of 64 MiB of memory pages written
// as an archive over a loopback TCP connection (as an export's answer) and
// unpacked on the other end (as an import), against copying its files.
func BenchmarkWriteRead64MiB(b *testing.B) {
	src := b.TempDir()
	page := make([]byte, 64<<20)
	for i := range page {
		page[i] = byte(i)
	}
	for name, data := range map[string][]byte{"pages-1.img": page, inventory: []byte("inv")} {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	b.SetBytes(int64(len(page)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		errc := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			errc <- Write(c, Contents{Config: Config{Name: "c"}, CheckpointDir: src})
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		dst := b.TempDir()
		if _, err := Read(context.Background(), c, dst, sizelimit.New(1<<30, "checkpoint archive")); err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, c)
		c.Close()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}
