// Package authtest makes JWKS documents and signed JWTs for tests of
// loom's JWT authentication: an Issuer with RSA, P-256 and Ed25519 keys,
// key rotation, and the malformed tokens an attacker would try.
package authtest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Issuer signs tokens with its current keys and publishes their public
// halves as a JWKS.
type Issuer struct {
	t        testing.TB
	Name     string // iss
	Audience string // aud
	keys     []signingKey
}

type signingKey struct {
	kid  string
	alg  jwa.SignatureAlgorithm
	priv jwk.Key
	pub  jwk.Key
	rsa  *rsa.PublicKey
}

// NewIssuer returns an issuer with one key of each kind: kids rsa-1,
// ec-1 and ed-1.
func NewIssuer(t testing.TB, name, audience string) *Issuer {
	is := &Issuer{t: t, Name: name, Audience: audience}
	is.AddKey("rsa-1", jwa.RS256())
	is.AddKey("ec-1", jwa.ES256())
	is.AddKey("ed-1", jwa.EdDSA())
	return is
}

// AddKey adds a new key of alg's kind under kid (a rotation).
func (is *Issuer) AddKey(kid string, alg jwa.SignatureAlgorithm) {
	var raw any
	var rsaPub *rsa.PublicKey
	var err error
	switch alg.String() {
	case "RS256":
		var k *rsa.PrivateKey
		k, err = rsa.GenerateKey(rand.Reader, 2048)
		raw, rsaPub = k, &k.PublicKey
	case "ES256":
		raw, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, raw, err = ed25519.GenerateKey(rand.Reader)
	default:
		is.t.Fatalf("authtest: unsupported algorithm %s", alg)
	}
	if err != nil {
		is.t.Fatal(err)
	}
	priv, err := jwk.Import(raw)
	if err != nil {
		is.t.Fatal(err)
	}
	priv.Set(jwk.KeyIDKey, kid)
	pub, err := jwk.PublicKeyOf(priv)
	if err != nil {
		is.t.Fatal(err)
	}
	is.keys = append(is.keys, signingKey{kid: kid, alg: alg, priv: priv, pub: pub, rsa: rsaPub})
}

// JWKS is the issuer's public keys as a JWKS document.
func (is *Issuer) JWKS() []byte {
	set := jwk.NewSet()
	for _, k := range is.keys {
		set.AddKey(k.pub)
	}
	b, err := json.Marshal(set)
	if err != nil {
		is.t.Fatal(err)
	}
	return b
}

// WriteJWKS writes the JWKS to path.
func (is *Issuer) WriteJWKS(path string) {
	if err := os.WriteFile(path, is.JWKS(), 0o600); err != nil {
		is.t.Fatal(err)
	}
}

// Claims are what a token says; zero fields take the issuer's values and
// an expiry an hour away.
type Claims struct {
	Subject   string
	Issuer    string
	Audience  string
	Expires   time.Time
	NotBefore time.Time
	Extra     map[string]any
}

func (is *Issuer) key(kid string) signingKey {
	for _, k := range is.keys {
		if k.kid == kid {
			return k
		}
	}
	is.t.Fatalf("authtest: no key %q", kid)
	return signingKey{}
}

func (is *Issuer) build(c Claims) jwt.Token {
	if c.Issuer == "" {
		c.Issuer = is.Name
	}
	if c.Audience == "" {
		c.Audience = is.Audience
	}
	if c.Expires.IsZero() {
		c.Expires = time.Now().Add(time.Hour)
	}
	b := jwt.NewBuilder().Subject(c.Subject).Issuer(c.Issuer).Audience([]string{c.Audience}).
		Expiration(c.Expires).IssuedAt(time.Now().Add(-time.Minute))
	if !c.NotBefore.IsZero() {
		b = b.NotBefore(c.NotBefore)
	}
	for k, v := range c.Extra {
		b = b.Claim(k, v)
	}
	tok, err := b.Build()
	if err != nil {
		is.t.Fatal(err)
	}
	return tok
}

// Token signs c with the key kid.
func (is *Issuer) Token(kid string, c Claims) string {
	k := is.key(kid)
	out, err := jwt.Sign(is.build(c), jwt.WithKey(k.alg, k.priv))
	if err != nil {
		is.t.Fatal(err)
	}
	return string(out)
}

// HMACWithPublicKey is the algorithm-confusion attack: c signed HS256
// with the RSA key kid's public key (PEM) as the HMAC secret, naming kid.
func (is *Issuer) HMACWithPublicKey(kid string, c Claims) string {
	k := is.key(kid)
	der, err := x509.MarshalPKIXPublicKey(k.rsa)
	if err != nil {
		is.t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hk, err := jwk.Import(secret)
	if err != nil {
		is.t.Fatal(err)
	}
	hk.Set(jwk.KeyIDKey, kid)
	out, err := jwt.Sign(is.build(c), jwt.WithKey(jwa.HS256(), hk))
	if err != nil {
		is.t.Fatal(err)
	}
	return string(out)
}

// Unsigned is c with "alg": "none" and no signature, naming kid.
func (is *Issuer) Unsigned(kid string, c Claims) string {
	payload, err := json.Marshal(is.build(c))
	if err != nil {
		is.t.Fatal(err)
	}
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
	enc := base64.RawURLEncoding
	return enc.EncodeToString(header) + "." + enc.EncodeToString(payload) + "."
}

// Tampered is a token signed by kid whose payload was changed afterwards
// (the subject replaced): its signature no longer matches.
func (is *Issuer) Tampered(kid string, c Claims, subject string) string {
	good := is.Token(kid, c)
	var parts [3]string
	n := 0
	start := 0
	for i := 0; i < len(good) && n < 2; i++ {
		if good[i] == '.' {
			parts[n] = good[start:i]
			start, n = i+1, n+1
		}
	}
	parts[2] = good[start:]
	c.Subject = subject
	payload, err := json.Marshal(is.build(c))
	if err != nil {
		is.t.Fatal(err)
	}
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
}
