package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server/authtest"
)

// Issue 15: tenants own what they create. Tenant B gets the same 404 as for
// a missing id on every operation on tenant A's response; tenant A still
// can do them all. Principals come from JWTs (verified against a JWKS
// file) or from --api-keys-file.

type apiResult struct {
	status int
	body   string
}

func call(t *testing.T, method, url, token, body string) apiResult {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiResult{resp.StatusCode, string(b)}
}

// checkOwnership runs every operation on a response of tenant A as tenant
// B, then as A.
func checkOwnership(t *testing.T, base, tokenA, tokenB string) {
	t.Helper()
	created := call(t, "POST", base+"/v1/responses", tokenA, `{"model":"m","input":"hi"}`)
	if created.status != http.StatusOK {
		t.Fatalf("A creates: %d %s", created.status, created.body)
	}
	var resp struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(created.body), &resp)
	id := resp.ID
	const missing = "resp_0123456789abcdef0123456789abcdef0123456789abcdef"
	ops := []struct {
		name, method, path, body string
		ownerStatus              int
	}{
		{"GET", "GET", "/v1/responses/" + id, "", http.StatusOK},
		{"input_items", "GET", "/v1/responses/" + id + "/input_items", "", http.StatusOK},
		{"replay", "GET", "/v1/responses/" + id + "?stream=true", "", http.StatusOK},
		{"cancel", "POST", "/v1/responses/" + id + "/cancel", "", http.StatusBadRequest}, // not a background response
		{"previous_response_id", "POST", "/v1/responses", `{"model":"m","input":"more","previous_response_id":"` + id + `"}`, http.StatusOK},
		{"DELETE", "DELETE", "/v1/responses/" + id, "", http.StatusOK},
	}
	for _, op := range ops {
		other := call(t, op.method, base+op.path, tokenB, op.body)
		absent := call(t, op.method, base+strings.ReplaceAll(op.path, id, missing), tokenB, strings.ReplaceAll(op.body, id, missing))
		if other.status != http.StatusNotFound {
			t.Errorf("B %s: %d %s, want 404", op.name, other.status, other.body)
		}
		// No existence oracle: B's 404 is the 404 of an id that does not exist.
		if strings.ReplaceAll(other.body, id, missing) != absent.body {
			t.Errorf("B %s: %s differs from the 404 of a missing id %s", op.name, other.body, absent.body)
		}
		if !strings.Contains(other.body, `"type":"not_found_error"`) || !strings.Contains(other.body, `"code":"not_found"`) {
			t.Errorf("B %s: not an OpenAI-shaped error: %s", op.name, other.body)
		}
	}
	for _, op := range ops {
		if got := call(t, op.method, base+op.path, tokenA, op.body); got.status != op.ownerStatus {
			t.Errorf("A %s: %d %s, want %d", op.name, got.status, got.body, op.ownerStatus)
		}
	}
	if got := call(t, "GET", base+"/v1/responses/"+id, tokenA, ""); got.status != http.StatusNotFound {
		t.Errorf("A's response after A deleted it: %d", got.status)
	}
}

// checkConversationOwnership runs every conversation operation on a
// conversation of tenant A as tenant B, then as A.
func checkConversationOwnership(t *testing.T, base, tokenA, tokenB string) {
	t.Helper()
	created := call(t, "POST", base+"/v1/conversations", tokenA, `{"items":[{"type":"message","role":"user","content":"hello"}],"metadata":{"k":"v"}}`)
	if created.status != http.StatusOK {
		t.Fatalf("A creates a conversation: %d %s", created.status, created.body)
	}
	var conv struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(created.body), &conv)
	items := call(t, "GET", base+"/v1/conversations/"+conv.ID+"/items", tokenA, "")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	json.Unmarshal([]byte(items.body), &list)
	if items.status != http.StatusOK || len(list.Data) != 1 {
		t.Fatalf("A lists its items: %d %s", items.status, items.body)
	}
	id, item := conv.ID, list.Data[0].ID
	const missing = "conv_0123456789abcdef0123456789abcdef0123456789abcdef"
	ops := []struct {
		name, method, path, body string
		ownerStatus              int
	}{
		{"GET", "GET", "/v1/conversations/" + id, "", http.StatusOK},
		{"update", "POST", "/v1/conversations/" + id, `{"metadata":{"k":"w"}}`, http.StatusOK},
		{"list items", "GET", "/v1/conversations/" + id + "/items", "", http.StatusOK},
		{"add items", "POST", "/v1/conversations/" + id + "/items", `{"items":[{"type":"message","role":"user","content":"more"}]}`, http.StatusOK},
		{"get item", "GET", "/v1/conversations/" + id + "/items/" + item, "", http.StatusOK},
		{"response on it", "POST", "/v1/responses", `{"model":"m","input":"hi","conversation":"` + id + `"}`, http.StatusOK},
		{"delete item", "DELETE", "/v1/conversations/" + id + "/items/" + item, "", http.StatusOK},
		{"DELETE", "DELETE", "/v1/conversations/" + id, "", http.StatusOK},
	}
	for _, op := range ops {
		other := call(t, op.method, base+op.path, tokenB, op.body)
		absent := call(t, op.method, base+strings.ReplaceAll(op.path, id, missing), tokenB, strings.ReplaceAll(op.body, id, missing))
		if other.status != http.StatusNotFound {
			t.Errorf("B conversation %s: %d %s, want 404", op.name, other.status, other.body)
		}
		if strings.ReplaceAll(other.body, id, missing) != absent.body {
			t.Errorf("B conversation %s: %s differs from the 404 of a missing id %s", op.name, other.body, absent.body)
		}
	}
	for _, op := range ops {
		if got := call(t, op.method, base+op.path, tokenA, op.body); got.status != op.ownerStatus {
			t.Errorf("A conversation %s: %d %s, want %d", op.name, got.status, got.body, op.ownerStatus)
		}
	}
}

func checkUnauthorized(t *testing.T, base, token, why string) {
	t.Helper()
	got := call(t, "POST", base+"/v1/responses", token, `{"model":"m","input":"hi"}`)
	var e struct {
		Error struct {
			Message, Type, Code string
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(got.body), &e); err != nil || got.status != http.StatusUnauthorized ||
		e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_api_key" || e.Error.Message == "" {
		t.Errorf("%s: %d %s, want an OpenAI-shaped 401", why, got.status, got.body)
	}
}

func upstreamForTenants(t *testing.T) string {
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	return up.URL + "/v1"
}

func TestTenantsJWT(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.test", "loom")
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	is.WriteJWKS(jwks)
	cfg := testConfig(t, upstreamForTenants(t))
	cfg.JWTJWKS, cfg.JWTIssuer, cfg.JWTAudience, cfg.JWTTenantClaim, cfg.JWTRefresh = jwks, is.Name, is.Audience, "sub", time.Hour
	m, _ := runMain(t, cfg, io.Discard)
	base := "http://" + m.Addr()

	tokenA := is.Token("rsa-1", authtest.Claims{Subject: "tenant-a"})
	tokenB := is.Token("ec-1", authtest.Claims{Subject: "tenant-b"})
	checkOwnership(t, base, tokenA, tokenB)
	checkConversationOwnership(t, base, tokenA, tokenB)

	a := authtest.Claims{Subject: "tenant-a"}
	checkUnauthorized(t, base, "", "no token")
	checkUnauthorized(t, base, is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", Expires: time.Now().Add(-time.Hour)}), "expired")
	checkUnauthorized(t, base, is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", Audience: "other"}), "wrong audience")
	checkUnauthorized(t, base, is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", Issuer: "https://evil.test"}), "wrong issuer")
	checkUnauthorized(t, base, is.Unsigned("rsa-1", a), "alg none")
	checkUnauthorized(t, base, is.HMACWithPublicKey("rsa-1", a), "HMAC with the public key")
	checkUnauthorized(t, base, is.Tampered("rsa-1", a, "tenant-b"), "bad signature")
}

// Issue 35, finding 4: a JWT's tenant is scoped by its issuer, so no token
// names a tenant of --api-key or --api-keys-file, whatever its sub.
func TestTenantsJWTAndAPIKeysApart(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.test", "loom")
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	is.WriteJWKS(jwks)
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, []byte(`[{"key":"sk-a","tenant":"A"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, upstreamForTenants(t))
	cfg.JWTJWKS, cfg.JWTIssuer, cfg.JWTAudience, cfg.JWTTenantClaim, cfg.JWTRefresh = jwks, is.Name, is.Audience, "sub", time.Hour
	cfg.APIKeysFile, cfg.APIKeys = keys, []string{"sk-default"}
	m, _ := runMain(t, cfg, io.Discard)
	base := "http://" + m.Addr()
	subDefault := is.Token("rsa-1", authtest.Claims{Subject: "default"})
	subA := is.Token("ec-1", authtest.Claims{Subject: "A"})
	checkOwnership(t, base, "sk-default", subDefault)
	checkOwnership(t, base, "sk-a", subA)
	checkOwnership(t, base, subA, "sk-a")
	checkConversationOwnership(t, base, "sk-default", subDefault)
}

func TestTenantsAPIKeysFile(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, []byte(`[{"key":"sk-a","tenant":"acme"},{"key":"sk-a2","tenant":"acme"},{"key":"sk-b","tenant":"globex"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, upstreamForTenants(t))
	cfg.APIKeysFile = keys
	cfg.APIKeys = []string{"sk-default"}
	m, _ := runMain(t, cfg, io.Discard)
	base := "http://" + m.Addr()
	checkOwnership(t, base, "sk-a", "sk-b")
	checkConversationOwnership(t, base, "sk-a", "sk-b")
	checkOwnership(t, base, "sk-default", "sk-a") // --api-key is a tenant of its own
	checkUnauthorized(t, base, "sk-c", "unknown key")

	// A background response runs later, on whichever replica claims its
	// job, and is still its tenant's when it ends.
	queued := call(t, "POST", base+"/v1/responses", "sk-a", `{"model":"m","input":"hi","background":true}`)
	var bg struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(queued.body), &bg)
	if queued.status != http.StatusOK || bg.ID == "" {
		t.Fatalf("background: %d %s", queued.status, queued.body)
	}
	if got := call(t, "POST", base+"/v1/responses/"+bg.ID+"/cancel", "sk-b", ""); got.status != http.StatusNotFound {
		t.Errorf("B cancels A's background response: %d %s", got.status, got.body)
	}
	// Following the stream returns once the response has ended.
	if got := call(t, "GET", base+"/v1/responses/"+bg.ID+"?stream=true", "sk-a", ""); got.status != http.StatusOK || !strings.Contains(got.body, "response.completed") {
		t.Fatalf("A follows its background response: %d %.300s", got.status, got.body)
	}
	if got := call(t, "GET", base+"/v1/responses/"+bg.ID, "sk-a", ""); got.status != http.StatusOK || !strings.Contains(got.body, `"status":"completed"`) {
		t.Errorf("A's background response after it ran: %d %.300s", got.status, got.body)
	}
	if got := call(t, "GET", base+"/v1/responses/"+bg.ID, "sk-b", ""); got.status != http.StatusNotFound {
		t.Errorf("B reads A's finished background response: %d", got.status)
	}

	// Two keys of one tenant share what it owns.
	created := call(t, "POST", base+"/v1/responses", "sk-a", `{"model":"m","input":"hi"}`)
	var resp struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(created.body), &resp)
	if got := call(t, "GET", base+"/v1/responses/"+resp.ID, "sk-a2", ""); got.status != http.StatusOK {
		t.Errorf("another key of the same tenant: %d", got.status)
	}
}

func TestTenantFlags(t *testing.T) {
	base := []string{"--upstream-url", "http://127.0.0.1:1/v1"}
	if _, err := parseServeFlags(append(base, "--jwt-jwks", "/x.json"), env(nil)); err == nil {
		t.Error("--jwt-jwks without --jwt-issuer and --jwt-audience accepted")
	}
	cfg, err := parseServeFlags(base, env(map[string]string{"LOOM_JWT_JWKS": "/x.json", "LOOM_JWT_ISSUER": "i", "LOOM_JWT_AUDIENCE": "a", "LOOM_API_KEYS_FILE": "/k.json"}))
	if err != nil || cfg.JWTJWKS != "/x.json" || cfg.JWTTenantClaim != "sub" || cfg.APIKeysFile != "/k.json" {
		t.Errorf("%v %+v", err, cfg)
	}
	// A keys file that does not parse stops loom from starting.
	bad := filepath.Join(t.TempDir(), "keys.json")
	os.WriteFile(bad, []byte(`[{"key":"k"}]`), 0o600)
	c := testConfig(t, "http://127.0.0.1:1/v1")
	c.APIKeysFile = bad
	m := NewMain(c, newLogger(io.Discard, "json", "info"))
	if err := m.Open(t.Context()); err == nil || !strings.Contains(err.Error(), "--api-keys-file") {
		t.Errorf("Open with a bad keys file: %v", err)
	}
	m.Close()

	// No API key's tenant may have a JWT tenant's name (SCOPE#CLAIM).
	os.WriteFile(bad, []byte(`[{"key":"k","tenant":"https://issuer.test#default"}]`), 0o600)
	m = NewMain(c, newLogger(io.Discard, "json", "info"))
	if err := m.Open(t.Context()); err == nil || !strings.Contains(err.Error(), "--api-keys-file") || !strings.Contains(err.Error(), "#") {
		t.Errorf("Open with a keys file naming a JWT tenant: %v", err)
	}
	m.Close()

	// The scope of JWT tenants may not contain the separator.
	jwt := append(base, "--jwt-jwks", "/x.json", "--jwt-audience", "a")
	if _, err := parseServeFlags(append(jwt, "--jwt-issuer", "https://i.test/#x"), env(nil)); err == nil || !strings.Contains(err.Error(), "--jwt-tenant-scope") {
		t.Errorf("an issuer with # and no --jwt-tenant-scope: %v", err)
	}
	if cfg, err := parseServeFlags(append(jwt, "--jwt-issuer", "https://i.test/#x", "--jwt-tenant-scope", "i"), env(nil)); err != nil || cfg.JWTTenantScope != "i" {
		t.Errorf("an issuer with # and a scope: %v", err)
	}
	if _, err := parseServeFlags(append(jwt, "--jwt-issuer", "https://i.test", "--jwt-tenant-scope", "a#b"), env(nil)); err == nil {
		t.Error("a scope with # accepted")
	}
	if _, err := parseServeFlags(append(base, "--jwt-tenant-scope", "i"), env(nil)); err == nil {
		t.Error("--jwt-tenant-scope without --jwt-jwks accepted")
	}
}

// Issue 35, finding 11: with --api-key, /metrics on the API listener needs
// the key; on --metrics-addr, the operator's own listener, it does not.
func TestMetricsBehindTheAPIKey(t *testing.T) {
	up := upstreamForTenants(t)
	cfg := testConfig(t, up)
	cfg.APIKeys = []string{"sk-1"}
	m, _ := runMain(t, cfg, io.Discard)
	if got := call(t, "GET", "http://"+m.Addr()+"/metrics", "", ""); got.status != http.StatusUnauthorized || !strings.Contains(got.body, `"invalid_api_key"`) {
		t.Errorf("API listener /metrics without the key: %d %.200s, want 401", got.status, got.body)
	}
	if got := call(t, "GET", "http://"+m.Addr()+"/metrics", "sk-1", ""); got.status != http.StatusOK || !strings.Contains(got.body, "go_goroutines") {
		t.Errorf("API listener /metrics with the key: %d %.200s", got.status, got.body)
	}
	cfg = testConfig(t, up)
	cfg.APIKeys, cfg.MetricsAddr = []string{"sk-1"}, "127.0.0.1:0"
	m, _ = runMain(t, cfg, io.Discard)
	if got := call(t, "GET", "http://"+m.MetricsAddr()+"/metrics", "", ""); got.status != http.StatusOK || !strings.Contains(got.body, "go_goroutines") {
		t.Errorf("--metrics-addr /metrics without a key: %d %.200s, want the metrics", got.status, got.body)
	}
}
