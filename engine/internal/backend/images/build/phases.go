package build

import (
	"io"
	"log/slog"
	"sync"
	"time"
)

// phases adds up where a build's time goes, so that a slow build can be
// explained from the engine's log: receiving the context, hashing it,
// keeping it for a later extraction, extracting it to disk, looking steps up in the cache, running steps and
// committing their images.
type phases struct {
	mu    sync.Mutex
	start time.Time
	spent map[string]time.Duration
}

// The phases a build reports.
const (
	phaseReceive = "receive"
	phaseHash    = "hash"
	phaseSpool   = "spool"
	phaseExtract = "extract"
	phaseCache   = "cache"
	phaseRun     = "run"
	phaseCommit  = "commit"
)

func newPhases() *phases {
	return &phases{start: time.Now(), spent: map[string]time.Duration{}}
}

// add records d spent in phase.
func (p *phases) add(phase string, d time.Duration) {
	p.mu.Lock()
	p.spent[phase] += d
	p.mu.Unlock()
}

// since records the time since start in phase.
func (p *phases) since(phase string, start time.Time) { p.add(phase, time.Since(start)) }

// log writes the phases as one line.
func (p *phases) log(logger *slog.Logger, msg string, attrs ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	attrs = append(attrs, "total_ms", ms(time.Since(p.start)))
	for _, name := range []string{phaseReceive, phaseHash, phaseSpool, phaseExtract, phaseCache, phaseRun, phaseCommit} {
		attrs = append(attrs, name+"_ms", ms(p.spent[name]))
	}
	logger.Info(msg, attrs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// timedReader counts the time its reads wait for the client as receive time.
type timedReader struct {
	r io.Reader
	p *phases
}

func (t timedReader) Read(b []byte) (int, error) {
	start := time.Now()
	n, err := t.r.Read(b)
	t.p.since(phaseReceive, start)
	return n, err
}
