package core

import (
	"context"
	"errors"
	"time"
)

// Secret errors (see errors.go for the mapping rules).
var (
	// ErrNoSuchSecret: no secret has the given name or ID (404).
	ErrNoSuchSecret = errors.New("no such secret")
	// ErrSecretInUse: a container uses the secret, so it cannot be removed (409).
	ErrSecretInUse = errors.New("secret is in use by a container")
)

// Secret is a secret as Podman's SecretInfoReport describes it. SecretData
// is filled only when the caller asked for it (inspect with showsecret).
type Secret struct {
	ID         string     `json:"ID"`
	CreatedAt  time.Time  `json:"CreatedAt"`
	UpdatedAt  time.Time  `json:"UpdatedAt"`
	Spec       SecretSpec `json:"Spec"`
	SecretData string     `json:"SecretData,omitempty"`
}

// SecretSpec is a secret's name, driver and labels.
type SecretSpec struct {
	Name   string            `json:"Name"`
	Driver SecretDriver      `json:"Driver"`
	Labels map[string]string `json:"Labels"`
}

// SecretDriver names the driver that holds a secret's data ("file").
type SecretDriver struct {
	Name    string            `json:"Name"`
	Options map[string]string `json:"Options"`
}

// SecretCreateOptions is a secret creation request (the query of
// POST /secrets/create); the data is the request body.
type SecretCreateOptions struct {
	Name       string
	Driver     string
	DriverOpts map[string]string
	Labels     map[string]string
	// Replace gives an existing secret of that name the new data and labels
	// (its ID stays); without it a taken name is ErrNameInUse.
	Replace bool
	// Ignore answers the existing secret's ID when the name is taken.
	Ignore bool
}

// SecretMount is one secret a container gets as a file (the creation
// spec's "secrets"): Source names the secret, Target is where it appears
// (empty: /run/secrets/SOURCE; relative: under /run/secrets).
type SecretMount struct {
	Source string `json:"Source"`
	Target string `json:"Target"`
	UID    uint32 `json:"UID"`
	GID    uint32 `json:"GID"`
	Mode   uint32 `json:"Mode"`
}

// Secrets is the secret domain of the engine.
type Secrets interface {
	// Create stores a secret and returns its ID.
	Create(ctx context.Context, opts SecretCreateOptions, data []byte) (string, error)
	// Inspect returns a secret by name, ID or unique ID prefix; with
	// showData its SecretData is filled.
	Inspect(ctx context.Context, nameOrID string, showData bool) (*Secret, error)
	// List returns the secrets matching filters (name, id, label, label!).
	List(ctx context.Context, filters map[string][]string) ([]*Secret, error)
	// Remove removes a secret no container uses (ErrSecretInUse otherwise).
	Remove(ctx context.Context, nameOrID string) error
	// RemoveAll removes every secret; when a container uses any of them,
	// nothing is removed (ErrSecretInUse).
	RemoveAll(ctx context.Context) error
}

// SecretUsers is what the secret backend needs from the container backend.
type SecretUsers interface {
	// ContainersUsingSecret returns the IDs of the containers that use the secret.
	ContainersUsingSecret(ctx context.Context, secretID string) ([]string, error)
}
