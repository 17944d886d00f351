package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/server/authtest"
)

// createAs creates a response as the tenant of token and returns its id.
func createAs(t *testing.T, url, token string) string {
	t.Helper()
	res := post(t, url, `{"model":"m","input":"hi"}`, map[string]string{"Authorization": "Bearer " + token})
	var body struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK || body.ID == "" {
		t.Fatalf("create: status %d, %v", res.StatusCode, err)
	}
	return body.ID
}

// getStatus is the status of GET /v1/responses/{id} as the tenant of token.
func getStatus(t *testing.T, url, id, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/responses/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Issue 35, finding 4: API-key tenants and JWT subjects shared one
// namespace, so a JWT whose sub was "default" read what --api-key created,
// sub "A" read API-key tenant A, and two issuers' equal subjects were one
// tenant. A JWT's tenant is now its issuer's scope, "#", and its claim.
func TestTenantsOfKeysAndTokensDoNotCollide(t *testing.T) {
	one := authtest.NewIssuer(t, "https://one.test", "loom")
	two := authtest.NewIssuer(t, "https://two.test", "loom")
	v1, _ := newVerifier(t, one, server.JWTOptions{})
	v2, _ := newVerifier(t, two, server.JWTOptions{})
	srv := newServer(t, answer("hi"), &server.Options{
		APIKeys:        []string{"sk-default"},
		Authenticators: []server.Authenticator{server.APIKeys{{Key: "sk-a", Tenant: "A"}}, v1, v2},
	})
	jwt := func(is *authtest.Issuer, sub string) string {
		return is.Token("rsa-1", authtest.Claims{Subject: sub})
	}

	byDefaultKey := createAs(t, srv.URL, "sk-default")
	if got := getStatus(t, srv.URL, byDefaultKey, jwt(one, "default")); got != http.StatusNotFound {
		t.Errorf("a JWT with sub \"default\" reads what --api-key created: %d, want 404", got)
	}
	if got := getStatus(t, srv.URL, byDefaultKey, "sk-default"); got != http.StatusOK {
		t.Errorf("--api-key reads its own response: %d", got)
	}

	byKeyA := createAs(t, srv.URL, "sk-a")
	if got := getStatus(t, srv.URL, byKeyA, jwt(one, "A")); got != http.StatusNotFound {
		t.Errorf("a JWT with sub \"A\" reads API-key tenant A's response: %d, want 404", got)
	}

	byOne := createAs(t, srv.URL, jwt(one, "u"))
	if got := getStatus(t, srv.URL, byOne, jwt(two, "u")); got != http.StatusNotFound {
		t.Errorf("another issuer's equal sub reads the response: %d, want 404", got)
	}
	// A claim cannot reach into another scope through the separator.
	if got := getStatus(t, srv.URL, byOne, jwt(two, "https://one.test#u")); got != http.StatusNotFound {
		t.Errorf("a sub naming the other issuer's tenant reads the response: %d, want 404", got)
	}
	if got := getStatus(t, srv.URL, byOne, jwt(one, "u")); got != http.StatusOK {
		t.Errorf("the same issuer and sub read their response: %d", got)
	}
	if got := getStatus(t, srv.URL, createAs(t, srv.URL, jwt(one, "A")), "sk-a"); got != http.StatusNotFound {
		t.Errorf("API-key tenant A reads the response of a JWT with sub \"A\": %d, want 404", got)
	}
}

// An API key's tenant may not contain "#", which every JWT tenant has:
// the keys file is refused at start, and a key built by a program
// embedding loom is refused when it is used.
func TestAPIKeyTenantNames(t *testing.T) {
	dir := t.TempDir()
	for _, tenantName := range []string{"https://one.test#u", "#", "a\x00b"} {
		path := filepath.Join(dir, "keys.json")
		data, _ := json.Marshal([]server.APIKey{{Key: "k", Tenant: tenantName}})
		os.WriteFile(path, data, 0o600)
		if _, err := server.LoadAPIKeys(path); err == nil {
			t.Errorf("LoadAPIKeys accepted tenant %q", tenantName)
		}
		if got, err := (server.APIKeys{{Key: "k", Tenant: tenantName}}).Authenticate(context.Background(), "k"); !errors.Is(err, server.ErrUnauthenticated) {
			t.Errorf("APIKeys authenticated tenant %q as %q (err %v)", tenantName, got, err)
		}
	}
	path := filepath.Join(dir, "keys.json")
	os.WriteFile(path, []byte(`[{"key":"k","tenant":"acme:team-1"}]`), 0o600)
	if _, err := server.LoadAPIKeys(path); err != nil {
		t.Errorf("a plain tenant name was refused: %v", err)
	}
}

// A JWT verifier's scope may not contain "#" (the scope would end
// elsewhere): an issuer with one needs a scope of its own. A claim that
// cannot be stored is a 401.
func TestJWTTenantScope(t *testing.T) {
	odd := authtest.NewIssuer(t, "https://odd.test/#frag", "loom")
	path := filepath.Join(t.TempDir(), "jwks.json")
	odd.WriteJWKS(path)
	opts := server.JWTOptions{JWKS: path, Issuer: odd.Name, Audience: odd.Audience}
	if _, err := server.NewJWTVerifier(context.Background(), &opts); err == nil || !strings.Contains(err.Error(), "#") {
		t.Errorf("an issuer with # as the scope: %v, want an error", err)
	}
	opts.TenantScope = "odd"
	v, err := server.NewJWTVerifier(context.Background(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Authenticate(context.Background(), odd.Token("ec-1", authtest.Claims{Subject: "u"})); err != nil || got != "odd#u" {
		t.Errorf("tenant %q, err %v; want odd#u", got, err)
	}
	if got, err := v.Authenticate(context.Background(), odd.Token("ec-1", authtest.Claims{Subject: "u\x00v"})); !errors.Is(err, server.ErrUnauthenticated) {
		t.Errorf("a sub with a NUL: tenant %q, err %v; want ErrUnauthenticated", got, err)
	}
}
