package contracts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pact-foundation/pact-go/v2/models"
	"github.com/pact-foundation/pact-go/v2/provider"

	"github.com/berth-project/berth/engine/testimage"
	"github.com/berth-project/berth/shared/syncbuf"
	"github.com/berth-project/berth/shared/testnet"
)

// buildTags are the tags containers/image and containers/storage need; the
// Makefile exports the same in GOFLAGS.
const buildTags = "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper"

// TestProvider verifies the pact file against a real berth-engine: the
// binary is built from ../engine, started on loopback with a temporary root
// and runroot, and every provider state is set up through its own API.
func TestProvider(t *testing.T) {
	pactPath, err := filepath.Abs(pactFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pactPath); err != nil {
		t.Fatalf("pact file missing (TestConsumer writes it): %v", err)
	}
	engine := startEngine(t)
	states := &stateSetup{base: engine.url + apiPrefix}
	// The quadlet and kube play interactions start containers: remove them
	// (and what the quadlets' activation made) before the engine stops.
	t.Cleanup(func() {
		if err := states.removeWorkloads(); err != nil {
			t.Errorf("removing the verification's workloads: %v", err)
		}
	})

	request := provider.VerifyRequest{
		ProviderBaseURL: engine.url,
		Provider:        providerName,
		PactFiles:       []string{pactPath},
		StateHandlers: models.StateHandlers{
			stateEngineRunning: states.handler(states.engineRunning),
			stateBusyboxExists: states.handler(states.busyboxExists),
			stateNoSuchImage:   states.handler(states.noSuchImage),
		},
		FailIfNoPactsFound:   true,
		DisableColoredOutput: true,
	}
	if err := provider.NewVerifier().VerifyProvider(t, request); err != nil {
		t.Errorf("provider verification failed; engine log:\n%s", engine.log())
	}

	// With a broker, also verify what consumers published there and, when
	// asked to, publish the results (docs/contracts.md).
	if broker := os.Getenv("PACT_BROKER_BASE_URL"); broker != "" {
		request.PactFiles = nil
		request.BrokerURL = broker
		request.BrokerToken = os.Getenv("PACT_BROKER_TOKEN")
		request.BrokerUsername = os.Getenv("PACT_BROKER_USERNAME")
		request.BrokerPassword = os.Getenv("PACT_BROKER_PASSWORD")
		request.ProviderVersion = os.Getenv("PACT_PROVIDER_VERSION")
		request.ProviderBranch = os.Getenv("PACT_PROVIDER_BRANCH")
		request.PublishVerificationResults = os.Getenv("PACT_PUBLISH_VERIFICATION_RESULTS") == "true"
		request.ConsumerVersionSelectors = []provider.Selector{&provider.ConsumerVersionSelector{MainBranch: true}}
		if err := provider.NewVerifier().VerifyProvider(t, request); err != nil {
			t.Errorf("verification of the broker's pacts failed: %v", err)
		}
	}
}

// stateSetup puts the engine into each provider state through its API.
type stateSetup struct {
	base string // engine URL with the API prefix
	mu   sync.Mutex
}

// handler is the verifier's StateHandler for a state that setUp puts the
// engine into: called, under the lock, when the state is set up; its
// teardown does nothing.
func (s *stateSetup) handler(setUp func() error) models.StateHandler {
	return func(setup bool, _ models.ProviderState) (models.ProviderStateResponse, error) {
		if !setup {
			return nil, nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, setUp()
	}
}

// engineRunning checks that the engine answers a ping.
func (s *stateSetup) engineRunning() error {
	status, body, err := s.call(http.MethodGet, "/_ping", nil)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("engine ping: %d %s %v", status, body, err)
	}
	return nil
}

// busyboxExists loads a busybox image (engine/testimage, from Debian's
// busybox-static) tagged localhost/busybox:latest with ImagesLoad.
func (s *stateSetup) busyboxExists() error {
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, testimage.Busybox(busyboxImage)); err != nil {
		return fmt.Errorf("state %q: building the archive: %w", stateBusyboxExists, err)
	}
	status, body, err := s.call(http.MethodPost, "/images/load", archive.Bytes())
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("state %q: load: %d %s %v", stateBusyboxExists, status, body, err)
	}
	status, body, err = s.call(http.MethodGet, "/images/"+busyboxImage+"/exists", nil)
	if err != nil || status != http.StatusNoContent {
		return fmt.Errorf("state %q: image missing after load: %d %s %v", stateBusyboxExists, status, body, err)
	}
	return nil
}

// noSuchImage removes localhost/nosuch:latest if anything created it.
func (s *stateSetup) noSuchImage() error {
	status, body, err := s.call(http.MethodGet, "/images/"+missingImage+"/exists", nil)
	if err != nil {
		return err
	}
	if status == http.StatusNoContent {
		status, body, err = s.call(http.MethodDelete, "/images/"+missingImage+"?force=true", nil)
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("state %q: remove: %d %s %v", stateNoSuchImage, status, body, err)
		}
	} else if status != http.StatusNotFound {
		return fmt.Errorf("state %q: exists answered %d %s", stateNoSuchImage, status, body)
	}
	return nil
}

// removeWorkloads removes every quadlet (tearing down its activation), pod
// and container of the engine.
func (s *stateSetup) removeWorkloads() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	status, body, err := s.call(http.MethodDelete, "/quadlets?all=true&force=true", nil)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("remove quadlets: %d %s %v", status, body, err)
	}
	for _, kind := range []string{"pods", "containers"} {
		status, body, err := s.call(http.MethodGet, "/"+kind+"/json?all=true", nil)
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("list %s: %d %s %v", kind, status, body, err)
		}
		var objects []struct {
			ID string `json:"Id"`
		}
		if err := json.Unmarshal([]byte(body), &objects); err != nil {
			return fmt.Errorf("list %s: %w", kind, err)
		}
		for _, o := range objects {
			status, body, err := s.call(http.MethodDelete, "/"+kind+"/"+o.ID+"?force=true", nil)
			if err != nil || status != http.StatusOK {
				return fmt.Errorf("remove %s %s: %d %s %v", kind, o.ID, status, body, err)
			}
		}
	}
	return nil
}

func (s *stateSetup) call(method, path string, body []byte) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, reader)
	if err != nil {
		return 0, "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-tar")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, strings.TrimSpace(string(data)), nil
}

// runningEngine is a berth-engine process started by a test.
type runningEngine struct {
	url    string
	output *syncbuf.Buffer
}

func (e *runningEngine) log() string { return e.output.String() }

// startEngine builds berth-engine from ../engine (or takes BERTH_ENGINE_BIN) and starts it on a free
// loopback port with state in a temporary directory; it is stopped with
// SIGTERM when the test ends.
func startEngine(t *testing.T) *runningEngine {
	t.Helper()
	// make test (hack/test.sh) builds the binary once for every test
	// that starts one: BERTH_ENGINE_BIN.
	binary := os.Getenv("BERTH_ENGINE_BIN")
	if binary == "" {
		binary = filepath.Join(t.TempDir(), "berth-engine")
		build := exec.Command("go", "build", "-tags", buildTags, "-o", binary, "./cmd/berth-engine")
		build.Dir = filepath.Join("..", "engine")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building berth-engine: %v\n%s", err, out)
		}
	}

	state, err := os.MkdirTemp("", "berth-contracts-engine-")
	if err != nil {
		t.Fatal(err)
	}
	port := testnet.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	output := &syncbuf.Buffer{}
	cmd := exec.Command(binary,
		"--listen", fmt.Sprintf("tcp://127.0.0.1:%d", port),
		"--root", filepath.Join(state, "root"),
		"--runroot", filepath.Join(state, "runroot"),
		// Containers the interactions start get a loopback-only network
		// namespace: nothing host-global (bridges, iptables) is made.
		"--network-default-mode", "private",
	)
	cmd.Stdout, cmd.Stderr = output, output
	cmd.Env = os.Environ()
	t.Cleanup(func() {
		if err := os.RemoveAll(state); err != nil {
			t.Logf("removing engine state %s: %v", state, err)
		}
	})
	testnet.StartServer(t, "berth-engine", cmd, 30*time.Second, true).WaitReady(t, url+apiPrefix+"/_ping", 60*time.Second, output.String)
	return &runningEngine{url: url, output: output}
}
