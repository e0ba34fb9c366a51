package imagestore

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/containers/image/v5/pkg/compression"
	"github.com/containers/image/v5/types"

	"github.com/berth-project/berth/engine/internal/core"
)

// registryContext returns a system context for talking to registries with
// the client's credentials and TLS choice. The cleanup function removes the
// temporary auth file written for per-registry credentials.
func (t *Transfer) registryContext(auth *core.RegistryAuth, tlsVerify *bool) (*types.SystemContext, func(), error) {
	sys := t.systemContext()
	cleanup := func() {}
	if tlsVerify != nil {
		sys.DockerInsecureSkipTLSVerify = types.NewOptionalBool(!*tlsVerify)
	}
	if auth == nil {
		return sys, cleanup, nil
	}
	if auth.Default != nil {
		sys.DockerAuthConfig = &types.DockerAuthConfig{
			Username:      auth.Default.Username,
			Password:      auth.Default.Password,
			IdentityToken: auth.Default.IdentityToken,
		}
	}
	if len(auth.PerRegistry) == 0 {
		return sys, cleanup, nil
	}
	path, err := t.writeAuthFile(auth.PerRegistry)
	if err != nil {
		return nil, nil, err
	}
	sys.AuthFilePath = path
	return sys, func() { _ = os.Remove(path) }, nil
}

// pushContext is registryContext for a push: with compressionFormat (""
// for the default) as the layers' compression, a name containers/image
// does not know being an invalid argument.
func (t *Transfer) pushContext(auth *core.RegistryAuth, tlsVerify *bool, compressionFormat string) (*types.SystemContext, func(), error) {
	var algo *compression.Algorithm
	if compressionFormat != "" {
		a, err := compression.AlgorithmByName(compressionFormat)
		if err != nil {
			return nil, nil, core.InvalidArgument("compressionFormat", err)
		}
		algo = &a
	}
	sys, cleanup, err := t.registryContext(auth, tlsVerify)
	if err != nil {
		return nil, nil, err
	}
	if algo != nil {
		sys.CompressionFormat = algo
	}
	return sys, cleanup, nil
}

// authFileEntry is one registry in a containers auth.json.
type authFileEntry struct {
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
}

// writeAuthFile writes credentials in the auth.json format containers/image
// reads, under the store's tmp directory (mode 0600).
func (t *Transfer) writeAuthFile(creds map[string]core.RegistryCredential) (string, error) {
	auths := make(map[string]authFileEntry, len(creds))
	for key, c := range creds {
		entry := authFileEntry{IdentityToken: c.IdentityToken}
		if c.Username != "" || c.Password != "" {
			entry.Auth = base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password))
		}
		auths[normalizeAuthKey(key)] = entry
	}
	data, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return "", err
	}
	f, err := t.tempFile("auth-*.json")
	if err != nil {
		return "", fmt.Errorf("writing credentials: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("writing credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing credentials: %w", err)
	}
	return f.Name(), nil
}

// normalizeAuthKey turns the keys clients use (URLs, Docker Hub's historical
// hosts) into the registry[/namespace] keys of auth.json.
func normalizeAuthKey(key string) string {
	stripped := strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	if stripped != key {
		stripped, _, _ = strings.Cut(stripped, "/")
	}
	switch stripped {
	case "registry-1.docker.io", "index.docker.io":
		return "docker.io"
	}
	return stripped
}

// RegistryContext is registryContext for other backends (artifacts) that
// talk to registries with the client's credentials and TLS choice.
func (t *Transfer) RegistryContext(auth *core.RegistryAuth, tlsVerify *bool) (*types.SystemContext, func(), error) {
	return t.registryContext(auth, tlsVerify)
}
