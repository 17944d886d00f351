package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// AuthChallengeError is an OAuth challenge (a 401, or a 403
// insufficient_scope, with a Bearer WWW-Authenticate) from a server loom
// runs no OAuth flow for: a request-supplied server_url, or an operator's
// server without an oauth block. Such a server takes only the static
// token of the tool's authorization field. Its text is meant for the
// model and the client: it says what happened and what would fix it, and
// carries no token.
type AuthChallengeError struct {
	Status int
	// Sent reports whether the request carried an authorization.
	Sent bool
	// Error is the challenge's OAuth error code (invalid_token,
	// insufficient_scope), if any; Scope the scopes it asks for.
	Code, Scope string
}

func (e *AuthChallengeError) Error() string {
	switch {
	case e.Code == "insufficient_scope":
		return fmt.Sprintf("the MCP server requires more OAuth scope than the given token has (HTTP %d, insufficient_scope, scope %q); a token with that scope is needed in the tool's authorization field", e.Status, e.Scope)
	case e.Sent:
		return fmt.Sprintf("the MCP server refused the token in the tool's authorization field (HTTP %d%s); it may be expired or for another server", e.Status, codeSuffix(e.Code))
	default:
		return fmt.Sprintf("the MCP server requires OAuth authorization (HTTP %d): give an access token in the tool's authorization field, or ask the operator to configure the server with OAuth", e.Status)
	}
}

// ClientReason implements the reason tools.Reason finds: the text is fit
// for the client (it names no token).
func (e *AuthChallengeError) ClientReason() string { return e.Error() }

func codeSuffix(code string) string {
	if code == "" {
		return ""
	}
	return ", " + code
}

// noOAuthKey marks a request context whose server has no OAuth handler.
type noOAuthKey struct{}

func withoutOAuth(ctx context.Context) context.Context {
	return context.WithValue(ctx, noOAuthKey{}, true)
}

// challenged turns an OAuth challenge answering a request of a server
// without OAuth into an *AuthChallengeError. A 401 or 403 without a Bearer
// challenge is left to the SDK to report as any other status.
func challenged(req *http.Request, resp *http.Response, sent bool) error {
	if v, _ := req.Context().Value(noOAuthKey{}).(bool); !v {
		return nil
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return nil
	}
	code, scopes, _ := bearerChallenge(cs)
	bearer := false
	for _, c := range cs {
		bearer = bearer || c.Scheme == "bearer"
	}
	if !bearer || resp.StatusCode == http.StatusForbidden && code != "insufficient_scope" {
		return nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	e := &AuthChallengeError{Status: resp.StatusCode, Sent: sent, Code: code}
	if len(scopes) > 0 {
		e.Scope = strings.Join(scopes, " ")
	}
	return e
}
