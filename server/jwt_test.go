package server_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
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
		tenant string // "" for refused
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
			if err != nil || got != tt.tenant {
				t.Errorf("tenant %q, err %v; want %q", got, err, tt.tenant)
			}
		})
	}
}

func TestJWTTenantClaim(t *testing.T) {
	is := authtest.NewIssuer(t, "https://issuer.test", "loom")
	v, _ := newVerifier(t, is, server.JWTOptions{TenantClaim: "org_id"})
	got, err := v.Authenticate(context.Background(), is.Token("rsa-1", authtest.Claims{Subject: "user-1", Extra: map[string]any{"org_id": "org-9"}}))
	if err != nil || got != "org-9" {
		t.Errorf("tenant %q, err %v; want org-9 from the org_id claim", got, err)
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
	if got, err := v.Authenticate(context.Background(), tok); err != nil || got != "tenant-a" {
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
