package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/backend/platform/strays"
	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/shared/buildinfo"
	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/shared/swagger"
)

// run parses flags (environment variables give the defaults), starts the
// engine and serves until ctx is done.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	if cfg.version {
		fmt.Fprintln(stdout, buildinfo.Get().String("berth-engine"))
		return nil
	}
	level, err := server.ParseLevel(cfg.logLevel)
	if err != nil {
		return usageError{err}
	}
	format, err := server.ParseLogFormat(cfg.logFormat)
	if err != nil {
		return usageError{err}
	}
	logger := server.NewLogger(stderr, format, level)

	// A copy of an earlier engine that a kill -9 left (see package
	// strays) would hold the API's address and the engine's files.
	if root, err := filepath.Abs(cfg.engine.Root); err == nil {
		killed, err := strays.Reap(root)
		if err != nil {
			logger.Warn("ending copies of an earlier engine", "err", err)
		}
		if len(killed) > 0 {
			logger.Info("ended copies of an earlier engine that a kill -9 left behind", "pids", killed)
		}
	}
	ln, err := server.Listen(cfg.engine.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.engine.Listen, err)
	}
	apiAuth, err := newAPIAuth(cfg.auth, ln, logger)
	if err != nil {
		ln.Close()
		return err
	}
	var dockerLn net.Listener
	if cfg.dockerSocket != "" {
		if !strings.HasPrefix(cfg.dockerSocket, "/") {
			ln.Close()
			return usageError{fmt.Errorf("docker-socket: %q is not an absolute path", cfg.dockerSocket)}
		}
		if dockerLn, err = server.Listen("unix://" + cfg.dockerSocket); err != nil {
			ln.Close()
			return fmt.Errorf("listen unix://%s: %w", cfg.dockerSocket, err)
		}
	}
	eng, err := engine.New(ctx, logger, cfg.engine)
	if err != nil {
		ln.Close()
		if dockerLn != nil {
			dockerLn.Close()
		}
		return err
	}
	defer eng.Close()
	fmt.Fprintf(stdout, "berth-engine listening on %s (root %s, storage driver %s)\n", cfg.engine.Listen, cfg.engine.Root, eng.StorageDriver())
	// The ids go on before authentication, so that a 401 carries them too.
	handler := server.RequestID(server.ReferenceID(apiAuth.handler(eng.Handler())))
	if dockerLn == nil {
		return server.RunWithLimits(ctx, ln, handler, logger, cfg.shutdownTimeout, apiAuth.limits())
	}
	// The extra unix socket serves the same handler, with the same token
	// rules (TLS is for tcp:// listeners); both stop together.
	fmt.Fprintf(stdout, "berth-engine listening on unix://%s too\n", cfg.dockerSocket)
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, 2)
	go func() {
		errs <- server.RunWithLimits(serveCtx, ln, handler, logger, cfg.shutdownTimeout, apiAuth.limits())
	}()
	go func() {
		errs <- server.RunWithLimits(serveCtx, dockerLn, handler, logger, cfg.shutdownTimeout, server.DefaultLimits)
	}()
	first := <-errs
	stop()
	return errors.Join(first, <-errs)
}

// config is the parsed command line.
type config struct {
	engine          engine.Config
	auth            authFlags
	logFormat       string
	logLevel        string
	shutdownTimeout time.Duration
	// version asks for the version line instead of serving.
	version bool
	// dockerSocket is a unix socket served besides --listen, for clients
	// and containers that expect a Docker socket to bind-mount.
	dockerSocket string
}

// parseFlags reads the flags of DESIGN.md; each defaults to its environment variable.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	name := "berth-engine"
	if len(args) > 0 {
		args = args[1:]
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(key, fallback string) string { return server.EnvOr(getenv, key, fallback) }
	fs.StringVar(&cfg.engine.Listen, "listen", env("BERTH_ENGINE_LISTEN", "unix:///run/berth/berth.sock"), "address to serve on: unix:///path or tcp://host:port (BERTH_ENGINE_LISTEN)")
	fs.StringVar(&cfg.engine.Root, "root", env("BERTH_ENGINE_ROOT", "/var/lib/berth"), "directory for persistent state (BERTH_ENGINE_ROOT)")
	fs.StringVar(&cfg.engine.RunRoot, "runroot", env("BERTH_ENGINE_RUNROOT", "/run/berth"), "directory for runtime state (BERTH_ENGINE_RUNROOT)")
	fs.StringVar(&cfg.engine.Runtime, "runtime", env("BERTH_ENGINE_RUNTIME", "runc"), "OCI runtime: runc or crun (BERTH_ENGINE_RUNTIME)")
	fs.StringVar(&cfg.engine.CgroupManager, "cgroup-manager", env("BERTH_ENGINE_CGROUP_MANAGER", ""), "cgroup manager: systemd (transient scopes and slices through systemd's D-Bus API) or cgroupfs; empty picks as Podman: systemd where systemd runs as PID 1 on cgroup v2, cgroupfs elsewhere (BERTH_ENGINE_CGROUP_MANAGER)")
	fs.StringVar(&cfg.engine.CRIU, "criu", env("BERTH_ENGINE_CRIU", ""), "CRIU binary for checkpoint and restore (runc only); empty: criu in PATH (BERTH_ENGINE_CRIU)")
	fs.StringVar(&cfg.engine.StorageDriver, "storage-driver", env("BERTH_ENGINE_STORAGE_DRIVER", ""), "storage driver: overlay or vfs; empty tries overlay and falls back to vfs (BERTH_ENGINE_STORAGE_DRIVER)")
	fs.StringVar(&cfg.engine.RegistriesConf, "registries-conf", env("BERTH_ENGINE_REGISTRIES_CONF", ""), "registries.conf for short-name resolution; empty uses ROOT/registries.conf, written on first start (BERTH_ENGINE_REGISTRIES_CONF)")
	fs.StringVar(&cfg.engine.SwaggerSpec, "swagger-spec", env("BERTH_ENGINE_SWAGGER_SPEC", swagger.DefaultEngineSwaggerSpec), "OpenAPI document to serve; the embedded copy is served where it is missing (BERTH_ENGINE_SWAGGER_SPEC)")
	fs.StringVar(&cfg.engine.Network.DefaultNetwork, "network-default", env("BERTH_ENGINE_NETWORK_DEFAULT", "podman"), "name of the default network, created at first start (BERTH_ENGINE_NETWORK_DEFAULT)")
	fs.StringVar(&cfg.engine.Network.DefaultBridge, "network-default-bridge", env("BERTH_ENGINE_NETWORK_DEFAULT_BRIDGE", "podman0"), "bridge of the default network (BERTH_ENGINE_NETWORK_DEFAULT_BRIDGE)")
	fs.StringVar(&cfg.engine.Network.DefaultSubnet, "network-default-subnet", env("BERTH_ENGINE_NETWORK_DEFAULT_SUBNET", "10.88.0.0/16"), "subnet of the default network (BERTH_ENGINE_NETWORK_DEFAULT_SUBNET)")
	pool := env("BERTH_ENGINE_NETWORK_SUBNET_POOL", "10.89.0.0/16")
	fs.StringVar(&pool, "network-subnet-pool", pool, "comma-separated IPv4 subnets that new networks get a /24 of (BERTH_ENGINE_NETWORK_SUBNET_POOL)")
	fs.StringVar(&cfg.engine.Network.DefaultMode, "network-default-mode", env("BERTH_ENGINE_NETWORK_DEFAULT_MODE", "bridge"), "network mode of containers that name none: bridge (the default network) or private (loopback only) (BERTH_ENGINE_NETWORK_DEFAULT_MODE)")
	fs.StringVar(&cfg.engine.Network.BridgePrefix, "network-bridge-prefix", env("BERTH_ENGINE_NETWORK_BRIDGE_PREFIX", "podman"), "new networks' bridges are named PREFIX1, PREFIX2 ... (BERTH_ENGINE_NETWORK_BRIDGE_PREFIX)")
	fs.StringVar(&cfg.logFormat, "log-format", env("BERTH_ENGINE_LOG_FORMAT", "text"), "log format: text or json (BERTH_ENGINE_LOG_FORMAT)")
	fs.StringVar(&cfg.logLevel, "log-level", env("BERTH_ENGINE_LOG_LEVEL", "info"), "log level: debug, info, warn, error (BERTH_ENGINE_LOG_LEVEL)")
	maxExpanded := env("BERTH_ENGINE_MAX_EXPANDED_SIZE", sizelimit.FormatSize(sizelimit.DefaultMax))
	fs.Func("max-expanded-size", "largest size a loaded or imported archive, build context or volume import may expand to, e.g. 16GiB (BERTH_ENGINE_MAX_EXPANDED_SIZE, default "+sizelimit.FormatSize(sizelimit.DefaultMax)+")", func(v string) error {
		maxExpanded = v
		return nil
	})
	cdiDirs := env("BERTH_ENGINE_CDI_SPEC_DIRS", "")
	fs.StringVar(&cdiDirs, "cdi-spec-dirs", cdiDirs, "comma-separated directories of CDI specs read after /etc/cdi and /var/run/cdi (a later directory wins a device both define) (BERTH_ENGINE_CDI_SPEC_DIRS)")
	activateEnv := env("BERTH_ENGINE_ACTIVATE_QUADLETS", "false")
	activate, activateErr := strconv.ParseBool(activateEnv)
	fs.BoolVar(&cfg.engine.ActivateQuadlets, "activate-quadlets", activate, "activate quadlets at install (create and start what they describe) unless the install says activate=false (BERTH_ENGINE_ACTIVATE_QUADLETS)")
	fs.StringVar(&cfg.dockerSocket, "docker-socket", env("BERTH_ENGINE_DOCKER_SOCKET", ""), "absolute path of a unix socket served besides --listen (both APIs, the same token rules), e.g. /run/berth/docker.sock for tools that bind-mount a Docker socket (BERTH_ENGINE_DOCKER_SOCKET)")
	cfg.auth.register(fs, env)
	fs.BoolVar(&cfg.version, "version", false, "print the version, commit and Go version, then exit")
	timeout := env("BERTH_ENGINE_SHUTDOWN_TIMEOUT", "30s")
	fs.Func("shutdown-timeout", "how long to wait for in-flight requests on shutdown (BERTH_ENGINE_SHUTDOWN_TIMEOUT, default 30s)", func(v string) error {
		timeout = v
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	d, err := time.ParseDuration(timeout)
	if err != nil || d < 0 {
		return cfg, fmt.Errorf("shutdown-timeout %q is not a duration", timeout)
	}
	cfg.shutdownTimeout = d
	if activateErr != nil {
		return cfg, fmt.Errorf("BERTH_ENGINE_ACTIVATE_QUADLETS %q is not a boolean", activateEnv)
	}
	if cfg.engine.MaxExpandedSize, err = sizelimit.ParseSize(maxExpanded); err != nil {
		return cfg, fmt.Errorf("max-expanded-size: %w", err)
	}
	for _, d := range strings.Split(cdiDirs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			if !filepath.IsAbs(d) {
				return cfg, fmt.Errorf("cdi-spec-dirs: %q is not an absolute path", d)
			}
			cfg.engine.CDISpecDirs = append(cfg.engine.CDISpecDirs, d)
		}
	}
	for _, p := range strings.Split(pool, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.engine.Network.SubnetPool = append(cfg.engine.Network.SubnetPool, p)
		}
	}
	switch cfg.engine.Runtime {
	case "runc", "crun":
	default:
		return cfg, fmt.Errorf("runtime %q: want runc or crun", cfg.engine.Runtime)
	}
	switch cfg.engine.StorageDriver {
	case "", "overlay", "vfs":
	default:
		return cfg, fmt.Errorf("storage-driver %q: want overlay or vfs", cfg.engine.StorageDriver)
	}
	if err := cfg.auth.check(cfg.engine.Listen); err != nil {
		return cfg, err
	}
	if cfg.engine.Root == "" || cfg.engine.RunRoot == "" {
		return cfg, errors.New("root and runroot must not be empty")
	}
	return cfg, nil
}
