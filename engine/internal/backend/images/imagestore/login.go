package imagestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/containers/image/v5/docker"

	"github.com/berth-project/berth/engine/internal/core"
)

// CheckLogin asks registry whether it takes cred (the registry's /v2/
// with the credential, through its token service where it has one): what
// dockerd does for a login.
func (t *Transfer) CheckLogin(ctx context.Context, registry string, cred core.RegistryCredential, tlsVerify *bool) error {
	if registry == "" {
		return core.InvalidArgument("serveraddress", errors.New("a registry is required"))
	}
	sys, cleanup, err := t.registryContext(nil, tlsVerify)
	if err != nil {
		return err
	}
	defer cleanup()
	err = docker.CheckAuth(ctx, sys, cred.Username, cred.Password, registry)
	var refused docker.ErrUnauthorizedForCredentials
	if errors.As(err, &refused) {
		return fmt.Errorf("login to %s: %w: %v", registry, core.ErrUnauthorized, refused.Err)
	}
	if err != nil {
		return fmt.Errorf("login to %s: %w", registry, err)
	}
	return nil
}
