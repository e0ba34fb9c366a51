package contracts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/engineclient"
	"github.com/pact-foundation/pact-go/v2/consumer"
	"github.com/pact-foundation/pact-go/v2/matchers"
)

const (
	consumerName = "berth-uploads"
	providerName = "berth-engine"
	// apiPrefix is the prefix engineclient calls under by default.
	apiPrefix = engineclient.DefaultAPIPrefix

	// Provider states, set up by the provider test through the engine's API.
	stateBusyboxExists = "image localhost/busybox:latest exists"
	stateNoSuchImage   = "image localhost/nosuch:latest does not exist"
	stateEngineRunning = "the engine is running"

	busyboxImage = "localhost/busybox:latest"
	missingImage = "localhost/nosuch:latest"

	// contractUnit is the quadlet unit the install interaction sends: a
	// container of the busybox image, activated by the engine.
	contractUnit = "[Unit]\nDescription=berth contract container\n\n[Container]\nImage=" + busyboxImage + "\nExec=sleep 1000\n"
	// badUnit names a key no .container unit has.
	badUnit = "[Container]\nImage=" + busyboxImage + "\nImagee=typo\n"
	// contractKube is the Kubernetes YAML the kube play interaction sends: a
	// pod of one busybox container.
	contractKube = `apiVersion: v1
kind: Pod
metadata:
  name: berth-contract
spec:
  containers:
  - name: sleeper
    image: localhost/busybox:latest
    command: ["sleep", "1000"]
`
	// invalidKube is YAML that does not even parse.
	invalidKube = "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n"
)

// pactFile is the committed contract, written by TestConsumer.
var pactFile = filepath.Join("pacts", consumerName+"-"+providerName+".json")

// corruptArchive is what the corrupt-archive interaction sends: bytes that
// are no tar archive at all.
var corruptArchive = []byte("this is not an image archive\n")

// engineErrorBody matches the engine's {cause,message,response} error body.
func engineErrorBody(status int) matchers.Map {
	return matchers.Map{
		"cause":    matchers.Like("image not known"),
		"message":  matchers.Like("localhost/nosuch:latest: image not known"),
		"response": matchers.Integer(status),
	}
}

// clientFor returns an engineclient pointed at the mock server, without
// retries so a contract mismatch shows as the first failure.
func clientFor(t *testing.T, cfg consumer.MockServerConfig) *engineclient.Client {
	t.Helper()
	client, err := engineclient.New(engineclient.Config{
		URL:      fmt.Sprintf("http://%s:%d", cfg.Host, cfg.Port),
		Attempts: 1,
		Timeout:  10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// TestConsumer records every engine interaction uploads uses and rewrites
// the pact file from scratch. It runs before TestProvider (file order), which
// then verifies the fresh file against a real engine.
func TestConsumer(t *testing.T) {
	// The FFI merges into an existing file: write into an empty directory so
	// removed or changed interactions do not linger, and replace the
	// committed file only when every interaction passed.
	pactDir := t.TempDir()
	t.Cleanup(func() {
		if !t.Failed() {
			publishPact(t, filepath.Join(pactDir, filepath.Base(pactFile)))
		}
	})
	mock, err := consumer.NewV3Pact(consumer.MockHTTPProviderConfig{
		Consumer: consumerName,
		Provider: providerName,
		Host:     "127.0.0.1",
		PactDir:  pactDir,
		LogDir:   t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	imageArchive := tinyImageArchive(t, contractImage)
	unitArchive := quadletArchive(t, "berth-contract.container", contractUnit)
	badUnitArchive := quadletArchive(t, "berth-bad.container", badUnit)

	for _, ia := range []interaction{
		{
			name: "ping", state: stateEngineRunning, description: "a ping",
			method: "GET", path: apiPrefix + "/_ping",
			status: 200, response: func(b *consumer.V3ResponseBuilder) {
				b.Header("Libpod-Api-Version", matchers.Regex("4.3.1", `^\d+\.\d+\.\d+$`))
			},
			check: func(c *engineclient.Client) error {
				info, err := c.Ping(ctx)
				if err != nil {
					return err
				}
				if info.LibpodAPIVersion == "" {
					return errors.New("ping: no Libpod-Api-Version header")
				}
				return nil
			},
		},
		{
			name: "image load", state: stateEngineRunning, description: "an image load of a docker-archive",
			method: "POST", path: apiPrefix + "/images/load", request: tarBody(imageArchive),
			status: 200, response: jsonBody(matchers.Map{
				"Names": matchers.EachLike(matchers.Regex(contractImage, `^localhost/berth-contract:latest$`), 1),
			}),
			check: func(c *engineclient.Client) error {
				names, err := c.LoadImageReader(ctx, bytes.NewReader(imageArchive))
				if err != nil {
					return err
				}
				if len(names) != 1 || names[0] != contractImage {
					return fmt.Errorf("loaded names = %v, want [%s]", names, contractImage)
				}
				return nil
			},
		},
		{
			name: "image load of a corrupt archive", state: stateEngineRunning, description: "an image load of a corrupt archive",
			method: "POST", path: apiPrefix + "/images/load", request: func(b *consumer.V3RequestBuilder) {
				b.Body("application/x-tar", corruptArchive)
			},
			status: 400, response: jsonBody(engineErrorBody(400)),
			check: func(c *engineclient.Client) error {
				_, err := c.LoadImageReader(ctx, bytes.NewReader(corruptArchive))
				var apiErr *engineclient.Error
				if !errors.As(err, &apiErr) || !errors.Is(err, engineclient.ErrBadRequest) {
					return fmt.Errorf("load of a corrupt archive: err = %v, want a 400 *engineclient.Error", err)
				}
				if apiErr.Message == "" || apiErr.Cause == "" {
					return fmt.Errorf("error body not decoded: %+v", apiErr)
				}
				return nil
			},
		},
		{
			name: "quadlet install", state: stateBusyboxExists, description: "a quadlet install of a .container unit, activated",
			method: "POST", path: apiPrefix + "/quadlets", request: quadletInstall(unitArchive),
			status: 200, response: jsonBody(matchers.Map{
				"InstalledQuadlets": matchers.Like(map[string]string{
					"berth-contract.container": "/var/lib/berth/quadlets/berth-contract/berth-contract.container",
				}),
			}),
			check: func(c *engineclient.Client) error {
				report, err := c.InstallQuadlets(ctx, openBytes(unitArchive), engineclient.QuadletInstallOptions{Replace: true, Activate: true})
				if err != nil {
					return err
				}
				if report.Installed["berth-contract.container"] == "" || len(report.Errors) != 0 {
					return fmt.Errorf("install report = %+v", report)
				}
				return nil
			},
		},
		{
			name: "quadlet install refused", state: stateEngineRunning, description: "a quadlet install of a unit with an unknown key",
			method: "POST", path: apiPrefix + "/quadlets", request: quadletInstall(badUnitArchive),
			status: 400, response: jsonBody(matchers.Map{
				"cause":    matchers.Like("unsupported key"),
				"message":  matchers.Regex("berth-bad.container line 3: [Container] key Imagee: unsupported key in a .container unit", `^.*berth-bad\.container.*Imagee.*$`),
				"response": matchers.Integer(400),
			}),
			check: func(c *engineclient.Client) error {
				_, err := c.InstallQuadlets(ctx, openBytes(badUnitArchive), engineclient.QuadletInstallOptions{Replace: true, Activate: true})
				var apiErr *engineclient.Error
				if !errors.As(err, &apiErr) || !errors.Is(err, engineclient.ErrBadRequest) || !strings.Contains(apiErr.Message, "Imagee") {
					return fmt.Errorf("install of a bad unit: err = %v, want a 400 naming the key", err)
				}
				return nil
			},
		},
		{
			name: "kube play", state: stateBusyboxExists, description: "a kube play of a pod",
			method: "POST", path: apiPrefix + "/kube/play", request: kubePlay(contractKube),
			status: 200, response: jsonBody(matchers.Map{
				"Pods": matchers.EachLike(matchers.Map{
					"ID":         matchers.Regex(strings.Repeat("ab", 32), `^[0-9a-f]{64}$`),
					"Containers": matchers.EachLike(matchers.Regex(strings.Repeat("cd", 32), `^[0-9a-f]{64}$`), 1),
				}, 1),
			}),
			check: func(c *engineclient.Client) error {
				report, err := c.KubePlay(ctx, openBytes([]byte(contractKube)), engineclient.KubePlayOptions{Replace: true})
				if err != nil {
					return err
				}
				if len(report.Pods) != 1 || len(report.Pods[0].ID) != 64 || len(report.Pods[0].Containers) == 0 {
					return fmt.Errorf("play report = %+v", report)
				}
				return nil
			},
		},
		{
			name: "kube play of invalid YAML", state: stateEngineRunning, description: "a kube play of invalid YAML",
			method: "POST", path: apiPrefix + "/kube/play", request: kubePlay(invalidKube),
			status: 400, response: jsonBody(engineErrorBody(400)),
			check: func(c *engineclient.Client) error {
				_, err := c.KubePlay(ctx, openBytes([]byte(invalidKube)), engineclient.KubePlayOptions{Replace: true})
				var apiErr *engineclient.Error
				if !errors.As(err, &apiErr) || !errors.Is(err, engineclient.ErrBadRequest) || apiErr.Message == "" {
					return fmt.Errorf("play of invalid YAML: err = %v, want a 400 with the engine's message", err)
				}
				return nil
			},
		},
		{
			name: "image exists", state: stateBusyboxExists, description: "an image exists check of a present image",
			method: "GET", path: apiPrefix + "/images/" + busyboxImage + "/exists",
			status: 204, check: imageExists(ctx, busyboxImage, true),
		},
		{
			name: "image does not exist", state: stateNoSuchImage, description: "an image exists check of a missing image",
			method: "GET", path: apiPrefix + "/images/" + missingImage + "/exists",
			status: 404, check: imageExists(ctx, missingImage, false),
		},
		{
			name: "image inspect", state: stateBusyboxExists, description: "an inspect of a present image",
			method: "GET", path: apiPrefix + "/images/" + busyboxImage + "/json",
			status: 200, response: jsonBody(matchers.Map{
				"Id":       matchers.Regex("2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e", `^[0-9a-f]{64}$`),
				"Digest":   matchers.Regex("sha256:0d1e2f3a4b5c6d7e8f9a0b1c2d3e2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c", `^sha256:[0-9a-f]{64}$`),
				"RepoTags": matchers.ArrayContaining([]any{busyboxImage}),
				"Created":  matchers.Regex("2024-01-01T00:00:00Z", `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`),
				"Size":     matchers.Integer(1024),
			}),
			check: func(c *engineclient.Client) error {
				image, err := c.InspectImage(ctx, busyboxImage)
				if err != nil {
					return err
				}
				if len(image.ID) != 64 || image.Size <= 0 || image.Created.IsZero() || len(image.RepoTags) == 0 {
					return fmt.Errorf("inspect decoded %+v", image)
				}
				return nil
			},
		},
		{
			name: "image inspect of a missing image", state: stateNoSuchImage, description: "an inspect of a missing image",
			method: "GET", path: apiPrefix + "/images/" + missingImage + "/json",
			status: 404, response: jsonBody(engineErrorBody(404)),
			check: func(c *engineclient.Client) error {
				_, err := c.InspectImage(ctx, missingImage)
				if !errors.Is(err, engineclient.ErrNotFound) {
					return fmt.Errorf("InspectImage of a missing image: err = %v, want ErrNotFound", err)
				}
				return nil
			},
		},
	} {
		t.Run(ia.name, func(t *testing.T) { ia.record(t, mock) })
	}
}

// interaction is one request uploads makes of the engine, recorded under
// name: the provider state it needs, the request (method, path and what
// request adds), the answer (status and what response adds), and check,
// which makes the request through engineclient against the mock server and
// says what it decoded wrong.
type interaction struct {
	name, state, description string
	method                   consumer.Method
	path                     string
	request                  consumer.V3RequestBuilderFunc // nil: no headers or body
	status                   int
	response                 consumer.V3ResponseBuilderFunc // nil: no headers or body
	check                    func(*engineclient.Client) error
}

// record adds the interaction to mock and runs its check.
func (ia interaction) record(t *testing.T, mock *consumer.V3HTTPMockProvider) {
	var request []consumer.V3RequestBuilderFunc
	if ia.request != nil {
		request = append(request, ia.request)
	}
	var response []consumer.V3ResponseBuilderFunc
	if ia.response != nil {
		response = append(response, ia.response)
	}
	err := mock.AddInteraction().
		Given(ia.state).
		UponReceiving(ia.description).
		WithRequest(ia.method, ia.path, request...).
		WillRespondWith(ia.status, response...).
		ExecuteTest(t, func(cfg consumer.MockServerConfig) error { return ia.check(clientFor(t, cfg)) })
	if err != nil {
		t.Fatal(err)
	}
}

// imageExists checks that ImageExists answers want for image, and no error.
func imageExists(ctx context.Context, image string, want bool) func(*engineclient.Client) error {
	return func(c *engineclient.Client) error {
		exists, err := c.ImageExists(ctx, image)
		if err != nil || exists != want {
			return fmt.Errorf("ImageExists(%s) = %v, %v; want %v, nil", image, exists, err, want)
		}
		return nil
	}
}

// jsonBody is a JSON answer whose body matches body.
func jsonBody(body any) consumer.V3ResponseBuilderFunc {
	return func(b *consumer.V3ResponseBuilder) {
		b.Header("Content-Type", matchers.Regex("application/json", `^application/json`))
		b.JSONBody(body)
	}
}

// tarBody sends archive as an application/x-tar body.
func tarBody(archive []byte) consumer.V3RequestBuilderFunc {
	return func(b *consumer.V3RequestBuilder) {
		b.BinaryBody(archive)
		b.Header("Content-Type", matchers.S("application/x-tar"))
	}
}

// quadletInstall is InstallQuadlets' request with Replace and Activate.
func quadletInstall(archive []byte) consumer.V3RequestBuilderFunc {
	return func(b *consumer.V3RequestBuilder) {
		b.Query("activate", matchers.S("true"))
		b.Query("replace", matchers.S("true"))
		tarBody(archive)(b)
	}
}

// kubePlay is KubePlay's request of yaml with Replace.
func kubePlay(yaml string) consumer.V3RequestBuilderFunc {
	return func(b *consumer.V3RequestBuilder) {
		b.Query("replace", matchers.S("true"))
		b.Body("application/yaml", []byte(yaml))
	}
}

// openBytes is an engineclient.Opener of data.
func openBytes(data []byte) engineclient.Opener {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
}

// quadletArchive is the tar InstallQuadlets takes, holding one unit, with V7
// headers for the same reason as the image archive (see v7TarOf).
func quadletArchive(t *testing.T, name, unit string) []byte {
	t.Helper()
	return v7TarOf(t, []tarEntry{{name: name, body: []byte(unit)}})
}

// publishPact replaces the committed pact file with the one just written.
func publishPact(t *testing.T, written string) {
	data, err := os.ReadFile(written)
	if err != nil {
		t.Errorf("pact file not written: %v", err)
		return
	}
	tmp := pactFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, pactFile); err != nil {
		t.Error(err)
	}
}
