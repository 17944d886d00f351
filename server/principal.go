package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/loomgate/loom/tenant"
)

// DefaultTenant owns what is created with a key of --api-key (which maps
// no key to a tenant of its own). No JWT can name it: a JWT's tenant is
// scoped by its issuer (tenant.Scoped).
const DefaultTenant = "default"

// ErrUnauthenticated is what an Authenticator returns for a token it does
// not accept. The client sees a 401 with a fixed message: why a token was
// refused is logged, not told.
var ErrUnauthenticated = errors.New("invalid bearer token")

// An Authenticator finds the tenant a bearer token belongs to. It returns
// ErrUnauthenticated (wrapped, with the reason) for a token it refuses.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (tenant string, err error)
}

// APIKey maps one static bearer token to a tenant, whose name passes
// tenant.CheckName (no JWT's tenant can have it).
type APIKey struct {
	Key    string `json:"key"`
	Tenant string `json:"tenant"`
}

// APIKeys authenticates static bearer tokens. Every key is compared, in
// constant time, whatever matched before: how long a check takes says
// nothing about which key, or how much of one, a token matched.
type APIKeys []APIKey

// Authenticate implements Authenticator.
func (ks APIKeys) Authenticate(_ context.Context, token string) (string, error) {
	name, found := "", 0
	for _, k := range ks {
		if subtle.ConstantTimeCompare([]byte(token), []byte(k.Key)) == 1 {
			name, found = k.Tenant, 1
		}
	}
	if found == 0 {
		return "", fmt.Errorf("%w: not a known API key", ErrUnauthenticated)
	}
	if err := tenant.CheckName(name); err != nil {
		// Not loaded by LoadAPIKeys: a name a JWT's tenant could have
		// must not be served.
		return "", fmt.Errorf("%w: the key's %v", ErrUnauthenticated, err)
	}
	return name, nil
}

// LoadAPIKeys reads a JSON file of [{"key", "tenant"}]. Every entry needs
// both, a key may appear once, and a tenant's name must pass
// tenant.CheckName: none may contain "#", which only JWT tenants have.
func LoadAPIKeys(path string) (APIKeys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys APIKeys
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("%s: want a JSON array of {\"key\", \"tenant\"}: %w", path, err)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		if k.Key == "" || k.Tenant == "" {
			return nil, fmt.Errorf("%s: entry %d needs a key and a tenant", path, i)
		}
		if err := tenant.CheckName(k.Tenant); err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", path, i, err)
		}
		if seen[k.Key] {
			return nil, fmt.Errorf("%s: entry %d repeats a key", path, i)
		}
		seen[k.Key] = true
	}
	return keys, nil
}
