package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// DefaultTenant owns what is created with a key of --api-key (which maps
// no key to a tenant of its own).
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

// APIKey maps one static bearer token to a tenant.
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
	tenant, found := "", 0
	for _, k := range ks {
		if subtle.ConstantTimeCompare([]byte(token), []byte(k.Key)) == 1 {
			tenant, found = k.Tenant, 1
		}
	}
	if found == 0 {
		return "", fmt.Errorf("%w: not a known API key", ErrUnauthenticated)
	}
	return tenant, nil
}

// LoadAPIKeys reads a JSON file of [{"key", "tenant"}]. Every entry needs
// both, and a key may appear once.
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
		if seen[k.Key] {
			return nil, fmt.Errorf("%s: entry %d repeats a key", path, i)
		}
		seen[k.Key] = true
	}
	return keys, nil
}
