package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/server/authtest"
)

func newVerifier(t *testing.T, is *authtest.Issuer, opts server.JWTOptions) (*server.JWTVerifier, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	is.WriteJWKS(path)
	opts.JWKS, opts.Issuer, opts.Audience = path, is.Name, is.Audience
	v, err := server.NewJWTVerifier(context.Background(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	return v, path
}

func TestJWTVerifier(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.test", "loom")
	v, _ := newVerifier(t, is, server.JWTOptions{})
	other := authtest.NewIssuer(t, "https://issuer.test", "loom") // same kids, other keys
	ok := authtest.Claims{Subject: "tenant-a"}
	tests := []struct {
		name   string
		token  string
		tenant string // "" for refused; else the claim, scoped by the issuer
	}{
		{"RS256", is.Token("rsa-1", ok), "tenant-a"},
		{"ES256", is.Token("ec-1", ok), "tenant-a"},
		{"EdDSA", is.Token("ed-1", ok), "tenant-a"},
		{"expiry within the skew", is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", Expires: time.Now().Add(-5 * time.Second)}), "tenant-a"},
		{"expired", is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", Expires: time.Now().Add(-time.Hour)}), ""},
		{"not yet valid", is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", NotBefore: time.Now().Add(time.Hour)}), ""},
		{"wrong audience", is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", Audience: "someone-else"}), ""},
		{"wrong issuer", is.Token("rsa-1", authtest.Claims{Subject: "tenant-a", Issuer: "https://evil.test"}), ""},
		{"alg none", is.Unsigned("rsa-1", ok), ""},
		{"HMAC keyed with the public key", is.HMACWithPublicKey("rsa-1", ok), ""},
		{"bad signature", is.Tampered("rsa-1", ok, "tenant-b"), ""},
		{"signed by another key under a known kid", other.Token("ec-1", ok), ""},
		{"no tenant claim", is.Token("rsa-1", authtest.Claims{}), ""},
		{"not a JWT", "sk-not-a-jwt", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Authenticate(context.Background(), tt.token)
			if tt.tenant == "" {
				if err == nil || !errors.Is(err, server.ErrUnauthenticated) {
					t.Errorf("accepted as %q (err %v), want ErrUnauthenticated", got, err)
				}
				return
			}
			if want := is.Name + "#" + tt.tenant; err != nil || got != want {
				t.Errorf("tenant %q, err %v; want %q", got, err, want)
			}
		})
	}
}

func TestJWTTenantClaim(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.test", "loom")
	v, _ := newVerifier(t, is, server.JWTOptions{TenantClaim: "org_id"})
	got, err := v.Authenticate(context.Background(), is.Token("rsa-1", authtest.Claims{Subject: "user-1", Extra: map[string]any{"org_id": "org-9"}}))
	if err != nil || got != "https://issuer.test#org-9" {
		t.Errorf("tenant %q, err %v; want org-9 from the org_id claim, scoped by the issuer", got, err)
	}
	if _, err := v.Authenticate(context.Background(), is.Token("rsa-1", authtest.Claims{Subject: "user-1", Extra: map[string]any{"org_id": 7}})); err == nil {
		t.Error("a non-string tenant claim was accepted")
	}
}

// A token naming a kid the keys lack reloads them: a rotated key is picked
// up at once, and the old key keeps working while it is published.
func TestJWTKeyRotation(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.test", "loom")
	v, path := newVerifier(t, is, server.JWTOptions{MinRefresh: -1})
	is.AddKey("rsa-2", jwa.RS256())
	tok := is.Token("rsa-2", authtest.Claims{Subject: "tenant-a"})
	if _, err := v.Authenticate(context.Background(), tok); err == nil {
		t.Fatal("a token of an unpublished key was accepted")
	}
	is.WriteJWKS(path) // the issuer publishes the new key
	if got, err := v.Authenticate(context.Background(), tok); err != nil || got != "https://issuer.test#tenant-a" {
		t.Fatalf("after rotation: tenant %q, err %v", got, err)
	}
	if _, err := v.Authenticate(context.Background(), is.Token("rsa-1", authtest.Claims{Subject: "tenant-a"})); err != nil {
		t.Errorf("the old key stopped working: %v", err)
	}
}

func TestJWTConfig(t *testing.T) {
	for _, o := range []server.JWTOptions{
		{JWKS: "/nonexistent/jwks.json", Issuer: "i", Audience: "a"},
		{JWKS: "http://127.0.0.1:1/jwks.json", Issuer: "i", Audience: "a"}, // not https
		{JWKS: "x", Audience: "a"},
		{JWKS: "x", Issuer: "i"},
	} {
		if _, err := server.NewJWTVerifier(context.Background(), &o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// The JWKS at an https URL: loaded at start, and reloaded for an unknown
// kid, so a rotation published there is picked up.
func TestJWTJWKSOverHTTPS(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.test", "loom")
	var mu sync.Mutex
	jwks := is.JWKS()
	var fetches atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	v, err := server.NewJWTVerifier(context.Background(), &server.JWTOptions{
		JWKS: srv.URL + "/.well-known/jwks.json", Issuer: is.Name, Audience: is.Audience,
		HTTPClient: srv.Client(), MinRefresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Authenticate(context.Background(), is.Token("ed-1", authtest.Claims{Subject: "t"})); err != nil || got != "https://issuer.test#t" {
		t.Fatalf("tenant %q, err %v", got, err)
	}
	is.AddKey("ec-2", jwa.ES256())
	mu.Lock()
	jwks = is.JWKS()
	mu.Unlock()
	before := fetches.Load()
	if got, err := v.Authenticate(context.Background(), is.Token("ec-2", authtest.Claims{Subject: "t"})); err != nil || got != "https://issuer.test#t" {
		t.Fatalf("after rotation: tenant %q, err %v", got, err)
	}
	if fetches.Load() != before+1 {
		t.Errorf("%d fetches for the unknown kid, want 1", fetches.Load()-before)
	}
	// A known kid fetches nothing.
	before = fetches.Load()
	v.Authenticate(context.Background(), is.Token("ec-2", authtest.Claims{Subject: "t"}))
	if fetches.Load() != before {
		t.Error("a token of a known key fetched the JWKS")
	}
}

// Run reloads the keys on its timer: a key published since is accepted
// after one Refresh even when unknown kids may not trigger a reload.
func TestJWTRefreshTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := authtest.NewIssuer(t, "https://issuer.test", "loom")
		v, path := newVerifier(t, is, server.JWTOptions{Refresh: time.Minute, MinRefresh: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { v.Run(ctx); close(done) }()
		is.AddKey("rsa-2", jwa.RS256())
		is.WriteJWKS(path)
		tok := is.Token("rsa-2", authtest.Claims{Subject: "t"})
		if _, err := v.Authenticate(context.Background(), tok); err == nil {
			t.Fatal("accepted before any reload (MinRefresh forbids one)")
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if got, err := v.Authenticate(context.Background(), tok); err != nil || got != "https://issuer.test#t" {
			t.Errorf("after the timer: tenant %q, err %v", got, err)
		}
		cancel()
		<-done
	})
}
