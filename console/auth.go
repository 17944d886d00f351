package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// MinTokenLength is the fewest characters the operator's token may have:
// it stands between the network and every tenant's runs.
const MinTokenLength = 16

// cookieName is the console's session cookie; secureCookieName its name
// when it is Secure: with the __Host- prefix the browser keeps it only
// from HTTPS, for this host alone and every path, so no plain-HTTP page
// or other host of the domain can set one in its place.
const (
	cookieName       = "loom_console"
	secureCookieName = "__Host-" + cookieName
)

// auth checks the operator's token on every request. A browser cannot send
// a bearer header when it navigates, so the token is also taken once, from
// the login form or ?token=, and exchanged for a cookie that holds a MAC of
// it (not the token itself). Every comparison is in constant time.
type auth struct {
	token  []byte
	cookie string // the cookie's value: hex HMAC-SHA256(token, cookieLabel)
}

const cookieLabel = "loom console session"

func newAuth(token string) *auth {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte(cookieLabel))
	return &auth{token: []byte(token), cookie: hex.EncodeToString(mac.Sum(nil))}
}

// equal compares a and b in constant time, whatever their lengths (each is
// hashed first, so the time does not tell the token's length either).
func equal(a, b []byte) bool {
	ha, hb := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// validToken reports whether t is the token.
func (a *auth) validToken(t string) bool { return t != "" && equal([]byte(t), a.token) }

// bearer is the token of r's Authorization header, if it has one (a
// header of another scheme offers "", which no token is).
func bearer(r *http.Request) (token string, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, t, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(t), true
}

// hasCookie reports whether r carries the session cookie, under either of
// its names.
func (a *auth) hasCookie(r *http.Request) bool {
	for _, name := range []string{secureCookieName, cookieName} {
		if c, err := r.Cookie(name); err == nil && equal([]byte(c.Value), []byte(a.cookie)) {
			return true
		}
	}
	return false
}

// setCookie gives the browser the session cookie: HttpOnly (no script
// reads it), SameSite=Strict (no other site's page sends it), and Secure
// under the __Host- name when the browser reached the console over HTTPS.
func (a *auth) setCookie(w http.ResponseWriter, r *http.Request) {
	name, secure := cookieName, overHTTPS(r)
	if secure {
		name = secureCookieName
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: a.cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure})
}

// overHTTPS reports whether the browser reached the console over HTTPS:
// the request came over TLS, or the proxy in front says so in
// X-Forwarded-Proto (its first value: the one the outermost proxy saw).
// The header is trusted for the cookie's Secure flag alone, which a
// client forging it can only turn against itself (its browser drops a
// Secure cookie that came over plain HTTP).
func overHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// withoutToken is r's address on the console without its token parameter,
// for the redirect that takes it out of the address bar and the history
// (the list when r's path is not one the console could serve).
func withoutToken(r *http.Request) string {
	q := r.URL.Query()
	q.Del("token")
	return localURL(r.URL.Path, r.URL.RawPath, q)
}
