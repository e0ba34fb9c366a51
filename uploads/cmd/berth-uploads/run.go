package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-project/berth/shared/auth"
	"github.com/berth-project/berth/shared/buildinfo"
	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/uploads/internal/api"
	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/guard"
	"github.com/berth-project/berth/uploads/internal/janitor"
	"github.com/berth-project/berth/uploads/internal/processor"
	"github.com/berth-project/berth/uploads/internal/store"
)

// options are the command line, each flag defaulting to its environment variable.
type options struct {
	listen          string
	dataDir         string
	database        string
	engineURL       string
	engineTLS       [3]string // CA, client certificate, client key
	engineTokenFile string
	tokensFile      string
	logFormat       string
	logLevel        string
	limits          api.Limits
	shutdownTimeout time.Duration
	pollInterval    time.Duration
	lease           time.Duration
	workers         int
	sweepInterval   time.Duration
	diskHeadroom    int64
	// version asks for the version line instead of serving.
	version bool
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	env := func(key, fallback string) string { return server.EnvOr(getenv, "BERTH_UPLOADS_"+key, fallback) }
	var o options
	fs := flag.NewFlagSet(filepath.Base(args[0]), flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", env("LISTEN", "tcp://127.0.0.1:8081"), "address to serve on: tcp://HOST:PORT or unix:///PATH ($BERTH_UPLOADS_LISTEN)")
	fs.StringVar(&o.dataDir, "data-dir", env("DATA_DIR", "/var/lib/berth-uploads"), "directory of the upload trees and the default SQLite database ($BERTH_UPLOADS_DATA_DIR)")
	fs.StringVar(&o.database, "database", env("DATABASE", ""), "postgres://... or a SQLite file; default DATA_DIR/uploads.db ($BERTH_UPLOADS_DATABASE)")
	fs.StringVar(&o.engineURL, "engine-url", env("ENGINE_URL", ""), "berth-engine to deploy into: tcp://, http://, https:// or unix:// URL; without it every file is \"unsupported file type\" ($BERTH_UPLOADS_ENGINE_URL)")
	fs.StringVar(&o.engineTLS[0], "engine-ca", env("ENGINE_CA", ""), "PEM CAs the https:// engine's certificate must chain to; the system's when empty ($BERTH_UPLOADS_ENGINE_CA)")
	fs.StringVar(&o.engineTLS[1], "engine-cert", env("ENGINE_CERT", ""), "PEM client certificate for an engine with --tls-client-ca; needs --engine-key ($BERTH_UPLOADS_ENGINE_CERT)")
	fs.StringVar(&o.engineTLS[2], "engine-key", env("ENGINE_KEY", ""), "PEM key of --engine-cert ($BERTH_UPLOADS_ENGINE_KEY)")
	fs.StringVar(&o.engineTokenFile, "engine-token-file", env("ENGINE_TOKEN_FILE", ""), "file holding the bearer token for an engine with --tokens-file ($BERTH_UPLOADS_ENGINE_TOKEN_FILE)")
	fs.StringVar(&o.tokensFile, "tokens-file", env("TOKENS_FILE", ""), "file of bearer tokens, one a line; when set /v1 requires one ($BERTH_UPLOADS_TOKENS_FILE)")
	fs.StringVar(&o.logFormat, "log-format", env("LOG_FORMAT", "text"), "log format: text or json ($BERTH_UPLOADS_LOG_FORMAT)")
	fs.StringVar(&o.logLevel, "log-level", env("LOG_LEVEL", "info"), "log level: debug, info, warn or error ($BERTH_UPLOADS_LOG_LEVEL)")
	maxFile := fs.String("max-file-size", env("MAX_FILE_SIZE", "4GiB"), "largest file, bytes or with a K/M/G/T(iB) suffix; 0 = unlimited ($BERTH_UPLOADS_MAX_FILE_SIZE)")
	maxUpload := fs.String("max-upload-size", env("MAX_UPLOAD_SIZE", "16GiB"), "largest total of one upload; 0 = unlimited ($BERTH_UPLOADS_MAX_UPLOAD_SIZE)")
	maxFiles := fs.String("max-files", env("MAX_FILES", "10000"), "most files in one upload; 0 = unlimited ($BERTH_UPLOADS_MAX_FILES)")
	maxPath := fs.String("max-path-length", env("MAX_PATH_LENGTH", "1024"), "longest file path in bytes; 0 = unlimited ($BERTH_UPLOADS_MAX_PATH_LENGTH)")
	maxDepth := fs.String("max-path-depth", env("MAX_PATH_DEPTH", "32"), "most segments of a file path; 0 = unlimited ($BERTH_UPLOADS_MAX_PATH_DEPTH)")
	shutdown := fs.String("shutdown-timeout", env("SHUTDOWN_TIMEOUT", "30s"), "how long in-flight requests may finish after SIGTERM/SIGINT ($BERTH_UPLOADS_SHUTDOWN_TIMEOUT)")
	poll := fs.String("poll-interval", env("POLL_INTERVAL", "1s"), "how often the worker looks for uploads to process ($BERTH_UPLOADS_POLL_INTERVAL)")
	lease := fs.String("processing-lease", env("PROCESSING_LEASE", "15s"), "how long a worker's claim on an upload lasts unrenewed ($BERTH_UPLOADS_PROCESSING_LEASE)")
	workers := fs.String("workers", env("WORKERS", "1"), "processing workers in this process ($BERTH_UPLOADS_WORKERS)")
	headroom := fs.String("disk-headroom", env("DISK_HEADROOM", "64MiB"), "free space in the data directory that writes leave for deletes (507 below it), also kept as a reserve file; 0 = none ($BERTH_UPLOADS_DISK_HEADROOM)")
	sweep := fs.String("sweep-interval", env("SWEEP_INTERVAL", "1m"), "how often to finish interrupted deletions, remove trees without an upload and temporaries of dead writes, and settle interrupted changes ($BERTH_UPLOADS_SWEEP_INTERVAL)")
	fs.BoolVar(&o.version, "version", false, "print the version, commit and Go version, then exit")
	if err := fs.Parse(args[1:]); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var errs []error
	size := func(name, v string) int64 {
		n, err := parseSize(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", name, err))
		}
		return n
	}
	count := func(name, v string) int {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("--%s %q: want a non-negative integer", name, v))
		}
		return n
	}
	duration := func(name, v string) time.Duration {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("--%s %q: want a positive duration such as 30s", name, v))
		}
		return d
	}
	o.limits = api.Limits{
		MaxFileSize:   size("max-file-size", *maxFile),
		MaxUploadSize: size("max-upload-size", *maxUpload),
		MaxFiles:      count("max-files", *maxFiles),
		MaxPathLength: count("max-path-length", *maxPath),
		MaxPathDepth:  count("max-path-depth", *maxDepth),
	}
	o.shutdownTimeout = duration("shutdown-timeout", *shutdown)
	o.pollInterval = duration("poll-interval", *poll)
	o.lease = duration("processing-lease", *lease)
	o.workers = count("workers", *workers)
	o.sweepInterval = duration("sweep-interval", *sweep)
	o.diskHeadroom = size("disk-headroom", *headroom)
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers: want at least 1"))
	}
	if o.dataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	format, err := server.ParseLogFormat(o.logFormat)
	if err != nil {
		errs = append(errs, err)
	}
	o.logFormat = format
	if _, err := server.ParseLevel(o.logLevel); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// parseSize reads a byte count: "1048576", "512K", "64MiB", "2G", "1TiB" (binary
// multiples whatever the spelling).
func parseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	upper := strings.ToUpper(s)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || (n > 0 && mult > (1<<62)/n) {
		return 0, fmt.Errorf("size %q: want a non-negative number of bytes, optionally with K, M, G or T", v)
	}
	return n * mult, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.version {
		fmt.Fprintln(stdout, buildinfo.Get().String("berth-uploads"))
		return nil
	}
	level, _ := server.ParseLevel(o.logLevel)
	logger := server.NewLogger(stderr, o.logFormat, level)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := os.MkdirAll(o.dataDir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	var tokens []string
	if o.tokensFile != "" {
		if tokens, err = auth.LoadTokens(o.tokensFile); err != nil {
			return err
		}
	}
	st, err := store.Open(ctx, o.database, o.dataDir)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer st.Close()
	tree, err := files.New(o.dataDir)
	if err != nil {
		return err
	}
	sweepTemp(tree, logger)
	space := files.NewSpace(o.dataDir, o.diskHeadroom)
	if err := space.Refill(); err != nil {
		logger.Warn("making the disk headroom reserve failed", "err", err)
	}

	checks := map[string]server.Check{"database": st.Ping, "disk": space.Check}
	deployer, err := newDeployer(o, logger, checks)
	if err != nil {
		return err
	}

	metrics := server.NewMetrics("berth_uploads")
	observe := api.RegisterMetrics(logger, metrics.Registry(), st)
	onFile := api.RegisterFileMetrics(metrics.Registry())
	workers := make([]*processor.Worker, o.workers)
	for i := range workers {
		workers[i] = processor.New(logger.With("component", "processor"), st, tree, deployer,
			processor.Config{PollInterval: o.pollInterval, Lease: o.lease, Observe: observe, OnFile: onFile})
	}
	handler := api.NewServer(logger, st, tree, api.Config{
		Limits:      o.limits,
		Tokens:      tokens,
		ReadyChecks: checks,
		Metrics:     metrics,
		Space:       space,
		OnPending: func() {
			for _, w := range workers {
				w.Wake()
			}
		},
	})

	ln, err := server.Listen(o.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "berth-uploads listening on %s\n", listenURL(ln))

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sweepTempEvery(workCtx, tree, logger, o.sweepInterval)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// What is left behind counts as such once older than the sweep interval, and
		// never before a change's lock could have timed out.
		sw := &janitor.Sweeper{Store: st, Tree: tree, Logger: logger.With("component", "sweep"), Grace: max(o.sweepInterval, guard.Timeout+time.Second), Space: space}
		sw.Run(workCtx, o.sweepInterval)
	}()
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.Run(workCtx)
		}()
	}
	serveErr := server.Run(ctx, ln, handler, logger, o.shutdownTimeout)
	// The workers stop after the server: each hands back its upload, which is resumed
	// on the next start (or by another replica).
	stopWork()
	wg.Wait()
	return serveErr
}

// sweepTemp removes the temporaries of writes whose writer is gone.
func sweepTemp(tree *files.Tree, logger *slog.Logger) {
	if n, err := tree.SweepTemp(); err != nil {
		logger.Warn("sweeping temporary files failed", "err", err)
	} else if n > 0 {
		logger.Info("removed temporary files of interrupted writes", "count", n)
	}
}

// sweepTempEvery runs sweepTemp every interval until ctx is done, so that
// leftovers of a crashed replica do not wait for a restart.
func sweepTempEvery(ctx context.Context, tree *files.Tree, logger *slog.Logger, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			sweepTemp(tree, logger)
		}
	}
}

// listenURL renders the bound address (the real port when :0 was asked for).
func listenURL(ln net.Listener) string {
	if ln.Addr().Network() == "unix" {
		return "unix://" + ln.Addr().String()
	}
	return "tcp://" + ln.Addr().String()
}
