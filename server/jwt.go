package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/loomgate/loom/tenant"
)

// JWTOptions configure a JWTVerifier.
type JWTOptions struct {
	// JWKS is where the public keys are: a file path or an https URL.
	JWKS string
	// Issuer and Audience must match the token's iss and aud.
	Issuer   string
	Audience string
	// TenantClaim names the claim whose string value names the tenant
	// (default "sub").
	TenantClaim string
	// TenantScope scopes the tenants of this verifier's tokens (default:
	// Issuer): a token's tenant is TenantScope + "#" + its claim
	// (tenant.Scoped), so that no token names an API key's tenant, nor
	// one of another issuer. It may not contain "#". Two verifiers given
	// the same scope share their tenants.
	TenantScope string
	// Skew is the clock skew allowed on exp, nbf and iat (default 30s).
	Skew time.Duration
	// Refresh is how often Run reloads the keys (default 10 minutes). A
	// token naming a kid the keys lack also reloads them, at most once per
	// MinRefresh (default 10s), so that rotated keys are picked up without
	// letting bad tokens hammer the key server.
	Refresh    time.Duration
	MinRefresh time.Duration
	// HTTPClient fetches an https JWKS (default: a client with a 10s
	// timeout).
	HTTPClient *http.Client
	// AllowHTTP lets JWKS be an http URL (tests on loopback).
	AllowHTTP bool
	Logger    *slog.Logger
}

// JWTVerifier verifies JWT bearer tokens locally on every request against
// a JWKS: RS256, ES256 and EdDSA signatures, iss, aud, exp and nbf. No
// session, no call to the issuer per request.
type JWTVerifier struct {
	opts JWTOptions
	log  *slog.Logger

	mu      sync.Mutex
	keys    jwk.Set
	loaded  time.Time
	loading chan struct{} // closed when the load in progress ends
}

// maxJWKSBytes caps a JWKS document.
const maxJWKSBytes = 1 << 20

// NewJWTVerifier loads the keys once: a JWKS that cannot be loaded at start
// is a configuration error.
func NewJWTVerifier(ctx context.Context, opts *JWTOptions) (*JWTVerifier, error) {
	v := &JWTVerifier{}
	if opts != nil {
		v.opts = *opts
	}
	o := &v.opts
	if o.JWKS == "" || o.Issuer == "" || o.Audience == "" {
		return nil, errors.New("a JWT verifier needs a JWKS, an issuer and an audience")
	}
	if o.TenantClaim == "" {
		o.TenantClaim = "sub"
	}
	if o.TenantScope == "" {
		o.TenantScope = o.Issuer
	}
	if err := tenant.CheckScope(o.TenantScope); err != nil {
		return nil, fmt.Errorf("a JWT verifier's tenants: %w", err)
	}
	if o.Skew <= 0 {
		o.Skew = 30 * time.Second
	}
	if o.Refresh <= 0 {
		o.Refresh = 10 * time.Minute
	}
	if o.MinRefresh < 0 {
		o.MinRefresh = 0
	} else if o.MinRefresh == 0 {
		o.MinRefresh = 10 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	v.log = o.Logger
	if u, err := url.Parse(o.JWKS); err == nil && u.Scheme != "" {
		if u.Scheme != "https" && !(o.AllowHTTP && u.Scheme == "http") {
			return nil, fmt.Errorf("JWKS URL %q: only https is accepted", o.JWKS)
		}
	}
	if err := v.reload(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// Run reloads the keys every Refresh until ctx ends. A failed reload keeps
// the keys loaded before (and is logged).
func (v *JWTVerifier) Run(ctx context.Context) {
	t := time.NewTicker(v.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := v.reload(ctx); err != nil {
				v.log.WarnContext(ctx, "jwt: reloading the JWKS failed; the keys loaded before stay", "err", err)
			}
		}
	}
}

// Authenticate implements Authenticator. The tenant is the token's claim
// scoped by TenantScope.
func (v *JWTVerifier) Authenticate(ctx context.Context, token string) (string, error) {
	raw := []byte(token)
	msg, err := jws.Parse(raw)
	if err != nil || len(msg.Signatures()) != 1 {
		return "", fmt.Errorf("%w: not a signed JWT", ErrUnauthenticated)
	}
	keys := v.keySet()
	if kid, ok := msg.Signatures()[0].ProtectedHeaders().KeyID(); ok {
		if _, known := keys.LookupKeyID(kid); !known {
			// Perhaps the issuer rotated its keys.
			keys = v.reloadForKid(ctx, kid)
		}
	}
	tok, err := jwt.Parse(raw,
		jwt.WithKeySet(keys),
		jwt.WithValidate(true),
		jwt.WithIssuer(v.opts.Issuer),
		jwt.WithAudience(v.opts.Audience),
		jwt.WithAcceptableSkew(v.opts.Skew),
		jwt.WithRequiredClaim("exp"),
	)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	var claim any
	if err := tok.Get(v.opts.TenantClaim, &claim); err != nil {
		return "", fmt.Errorf("%w: no %q claim", ErrUnauthenticated, v.opts.TenantClaim)
	}
	name, ok := claim.(string)
	if !ok || name == "" {
		return "", fmt.Errorf("%w: the %q claim is not a non-empty string", ErrUnauthenticated, v.opts.TenantClaim)
	}
	if err := tenant.CheckClaim(name); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	return tenant.Scoped(v.opts.TenantScope, name), nil
}

func (v *JWTVerifier) keySet() jwk.Set {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keys
}

// reloadForKid reloads the keys for a token whose kid they lack, unless
// they were loaded less than MinRefresh ago, and returns the keys to
// verify with.
func (v *JWTVerifier) reloadForKid(ctx context.Context, kid string) jwk.Set {
	v.mu.Lock()
	recent := time.Since(v.loaded) < v.opts.MinRefresh
	v.mu.Unlock()
	if !recent {
		if err := v.reload(ctx); err != nil {
			v.log.WarnContext(ctx, "jwt: reloading the JWKS for an unknown kid failed", "kid", kid, "err", err)
		}
	}
	return v.keySet()
}

// reload loads the keys; concurrent callers share one load.
func (v *JWTVerifier) reload(ctx context.Context) error {
	v.mu.Lock()
	if wait := v.loading; wait != nil {
		v.mu.Unlock()
		select {
		case <-wait:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan struct{})
	v.loading = done
	v.mu.Unlock()

	keys, err := v.load(ctx)
	v.mu.Lock()
	if err == nil {
		v.keys, v.loaded = keys, time.Now()
	}
	v.loading = nil
	v.mu.Unlock()
	close(done)
	return err
}

// load reads and parses the JWKS, keeping only public keys of the
// accepted kinds, each fixed to its one algorithm: a token cannot pick
// another (HMAC keyed with a public key, "none").
func (v *JWTVerifier) load(ctx context.Context) (jwk.Set, error) {
	data, err := v.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", v.opts.JWKS, err)
	}
	parsed, err := jwk.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", v.opts.JWKS, err)
	}
	out := jwk.NewSet()
	for i := range parsed.Len() {
		k, _ := parsed.Key(i)
		alg, ok := algorithmFor(k)
		if !ok {
			continue
		}
		pub, err := jwk.PublicKeyOf(k)
		if err != nil {
			continue
		}
		if err := pub.Set(jwk.AlgorithmKey, alg); err != nil {
			continue
		}
		out.AddKey(pub)
	}
	if out.Len() == 0 {
		return nil, fmt.Errorf("JWKS %s: no RSA, P-256 or Ed25519 public key", v.opts.JWKS)
	}
	return out, nil
}

// algorithmFor is the one algorithm a key verifies: RS256 for RSA, ES256
// for P-256, EdDSA for Ed25519. A key declaring another algorithm, and
// every symmetric key, is skipped.
func algorithmFor(k jwk.Key) (jwa.SignatureAlgorithm, bool) {
	var want jwa.SignatureAlgorithm
	switch k.KeyType() {
	case jwa.RSA():
		want = jwa.RS256()
	case jwa.EC():
		var crv jwa.EllipticCurveAlgorithm
		if err := k.Get(jwk.ECDSACrvKey, &crv); err != nil || crv != jwa.P256() {
			return want, false
		}
		want = jwa.ES256()
	case jwa.OKP():
		var crv jwa.EllipticCurveAlgorithm
		if err := k.Get(jwk.OKPCrvKey, &crv); err != nil || crv != jwa.Ed25519() {
			return want, false
		}
		want = jwa.EdDSA()
	default:
		return want, false
	}
	if declared, ok := k.Algorithm(); ok && declared.String() != want.String() {
		return want, false
	}
	return want, true
}

func (v *JWTVerifier) read(ctx context.Context) ([]byte, error) {
	src := v.opts.JWKS
	if !strings.HasPrefix(src, "https://") && !strings.HasPrefix(src, "http://") {
		return os.ReadFile(src)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
}
