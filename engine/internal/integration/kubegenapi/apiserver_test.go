package kubegenapi

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// The API server test's loopback ports (this package's share of 18200-18299).
const (
	etcdClientPort = 18210
	etcdPeerPort   = 18211
	apiServerPort  = 18212
	apiToken       = "bkg-admin-token"
)

// kubeVersion is the kube-apiserver hack/kube-apiserver.sh builds.
const kubeVersion = "v1.31.4"

// cluster is a running etcd + kube-apiserver on loopback.
type cluster struct {
	url    string
	caFile string
	client kubernetes.Interface
}

// startCluster starts etcd and kube-apiserver (no kubelet, no controllers:
// objects are stored, not run) and stops them when the test ends.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	etcd := "/usr/bin/etcd"
	need.All(t, "the kube-apiserver tests (Debian's etcd-server; hack/deps.sh test installs it)", etcd)
	apiserver := need.Cached(t, "BERTH_KUBE_APISERVER", "kube-apiserver-"+kubeVersion, "hack/kube-apiserver.sh")
	dir := t.TempDir()

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	start(t, filepath.Join(dir, "etcd.log"), etcd, "--data-dir", filepath.Join(dir, "etcd"), "--name", "bkg",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-cluster", fmt.Sprintf("bkg=http://127.0.0.1:%d", etcdPeerPort))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	writeFile(t, filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	writeFile(t, filepath.Join(dir, "tokens.csv"), []byte(apiToken+",admin,admin,system:masters\n"))
	certDir := filepath.Join(dir, "certs")
	start(t, filepath.Join(dir, "apiserver.log"), apiserver,
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(apiServerPort), "--cert-dir", certDir,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"), "--authorization-mode", "RBAC",
		// No controller manager creates the default service account.
		"--disable-admission-plugins", "ServiceAccount")

	c := &cluster{url: fmt.Sprintf("https://127.0.0.1:%d", apiServerPort), caFile: filepath.Join(certDir, "apiserver.crt")}
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, _ := http.NewRequest("GET", c.url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := probe.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "apiserver.log"))
			t.Fatalf("kube-apiserver not ready in 90s (%v):\n%s", err, tail(log, 3000))
		}
		time.Sleep(500 * time.Millisecond)
	}
	client, err := kubernetes.NewForConfig(&rest.Config{
		Host: c.url, BearerToken: apiToken, TLSClientConfig: rest.TLSClientConfig{CAFile: c.caFile}, Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.client = client
	return c
}

// start runs a command with its output in logPath and kills it (and waits
// for it) when the test ends.
func start(t testing.TB, logPath, bin string, args ...string) {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logFile.Close()
	})
}

// kubeconfig writes a kubeconfig for the cluster (with its CA when withCA)
// and returns its path.
func (c *cluster) kubeconfig(t testing.TB, withCA bool) string {
	t.Helper()
	ca := ""
	if withCA {
		ca = "\n    certificate-authority: " + c.caFile
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bkg
  cluster:
    server: %s%s
users:
- name: bkg-admin
  user:
    token: %s
contexts:
- name: bkg
  context: {cluster: bkg, user: bkg-admin}
current-context: bkg
`, c.url, ca, apiToken)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, p, []byte(cfg))
	return p
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
