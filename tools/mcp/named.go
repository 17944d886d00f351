package mcp

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/loomgate/loom/responses"
)

// NamedServer is an MCP server the operator configured. A request refers
// to it by server_label alone, without a server_url; its credentials and
// policies come from the configuration, and its URL is trusted (the SSRF
// policy guards request-supplied URLs, not the operator's).
type NamedServer struct {
	Label         string            `json:"server_label"`
	URL           string            `json:"server_url"`
	Authorization string            `json:"authorization,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	// RequireApproval and Elicitation are the defaults for this server; a
	// request's mcp tool may set its own.
	RequireApproval *responses.RequireApproval `json:"require_approval,omitempty"`
	Elicitation     string                     `json:"elicitation,omitempty"`
	// Roots answer roots/list for this server.
	Roots []Root `json:"roots,omitempty"`
	// OAuth, if set, has loom get and refresh access tokens for this
	// server (instead of a static authorization).
	OAuth *OAuthConfig `json:"oauth,omitempty"`
	// Tenants, if set, are the only tenants whose requests may use this
	// server; nil means every tenant.
	Tenants []string `json:"tenants,omitempty"`
}

// AllowsTenant reports whether a request of tenant may use the server.
func (s *NamedServer) AllowsTenant(tenant string) bool {
	return s.Tenants == nil || slices.Contains(s.Tenants, tenant)
}

// LoadOptions are what LoadNamedServers needs from its caller. Nil means
// defaults.
type LoadOptions struct {
	// Getenv reads the environment variables the file names
	// (client_secret_env); nil reads none, so those secrets are missing.
	Getenv func(string) string
}

// secretFields are fields an oauth block may not have: a secret is named
// (an environment variable, a file), never written in the servers file.
var secretFields = []string{"client_secret", "refresh_token", "access_token"}

// LoadNamedServers reads a JSON array of NamedServer from a file (loom's
// --mcp-servers). Labels must be unique and URLs present.
func LoadNamedServers(path string, opts *LoadOptions) (map[string]NamedServer, error) {
	var o LoadOptions
	if opts != nil {
		o = *opts
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []NamedServer
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var raw []struct {
		OAuth map[string]json.RawMessage `json:"oauth"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[string]NamedServer, len(list))
	for i, s := range list {
		switch {
		case s.Label == "":
			return nil, fmt.Errorf("%s: server %d has no server_label", path, i)
		case s.URL == "":
			return nil, fmt.Errorf("%s: server %q has no server_url", path, s.Label)
		case out[s.Label].Label != "":
			return nil, fmt.Errorf("%s: server_label %q is configured twice", path, s.Label)
		}
		switch s.Elicitation {
		case "", ElicitClient, ElicitModel, ElicitDecline:
		default:
			return nil, fmt.Errorf("%s: server %q: elicitation must be client, model or decline", path, s.Label)
		}
		if s.OAuth != nil {
			for _, f := range secretFields {
				if _, ok := raw[i].OAuth[f]; ok {
					return nil, fmt.Errorf("%s: server %q: oauth.%s: secrets are never written in the servers file (use client_secret_env or client_secret_file, and refresh_token_file)", path, s.Label, f)
				}
			}
			if s.Authorization != "" {
				return nil, fmt.Errorf("%s: server %q: authorization and oauth are exclusive", path, s.Label)
			}
			// Relative files are relative to the servers file (loom
			// mcp login writes the refresh token there).
			for _, f := range []*string{&s.OAuth.RefreshTokenFile, &s.OAuth.ClientSecretFile} {
				if *f != "" && !filepath.IsAbs(*f) {
					*f = filepath.Join(filepath.Dir(path), *f)
				}
			}
			if err := s.OAuth.Validate(s.Label, o.Getenv); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		if s.Tenants != nil && len(s.Tenants) == 0 {
			return nil, fmt.Errorf("%s: server %q: tenants is empty: no tenant could use it (omit it for all)", path, s.Label)
		}
		out[s.Label] = s
	}
	return out, nil
}
