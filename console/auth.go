package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// cookieName is the console's session cookie.
const cookieName = "loom_console"

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

// allowed reports whether r carries the token: a bearer header or the
// session cookie.
func (a *auth) allowed(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && a.validToken(strings.TrimSpace(t))
	}
	c, err := r.Cookie(cookieName)
	return err == nil && equal([]byte(c.Value), []byte(a.cookie))
}

// setCookie gives the browser the session cookie: HttpOnly (no script
// reads it), SameSite=Strict (no other site's page sends it), Secure
// when the console is served over TLS.
func (a *auth) setCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: a.cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// withoutToken is r's address on the console without its token parameter,
// for the redirect that takes it out of the address bar and the history
// (the list when r's path is not one the console could serve).
func withoutToken(r *http.Request) string {
	q := r.URL.Query()
	q.Del("token")
	return localURL(r.URL.Path, r.URL.RawPath, q)
}
