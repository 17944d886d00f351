package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/mcp"
)

// redirectURL is where the suite's authorization server sends the code. No
// one listens there: the suite's server answers the authorization request
// at once with a redirect, and authorizationCode reads the code from it.
const redirectURL = "http://localhost:3000/callback"

// oauthHandler is the SDK's authorization-code handler as a client would
// configure it: a client ID metadata document first, then a
// pre-registered client when the scenario gives one, then dynamic
// registration. Every fetch goes through loom's OAuth HTTP client, so the
// SSRF policy judges the metadata, registration and token endpoints.
func oauthHandler(hc *http.Client, conf scenarioContext) (auth.OAuthHandler, error) {
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirectURL,
		AuthorizationCodeFetcher: authorizationCode(hc),
		ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{
			// The suite's authorization server fetches no document: it
			// expects exactly this URL as the client ID (auth/basic-cimd).
			URL: "https://conformance-test.local/client-metadata.json",
		},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName:   "loom-mcpconformance",
				RedirectURIs: []string{redirectURL},
			},
		},
		RequestRefreshToken: true,
		Client:              hc,
	}
	if conf.ClientID != "" {
		cfg.PreregisteredClient = &oauthex.ClientCredentials{
			ClientID:         conf.ClientID,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: conf.ClientSecret},
		}
	}
	return auth.NewAuthorizationCodeHandler(cfg)
}

// authorizationCode plays the user's browser: it opens the authorization
// URL and, instead of following the redirect to redirectURL, reads the
// code, state and issuer from it.
func authorizationCode(hc *http.Client) auth.AuthorizationCodeFetcher {
	browser := *hc
	browser.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
		if err != nil {
			return nil, err
		}
		resp, err := browser.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 3 {
			return nil, fmt.Errorf("authorization endpoint answered %s, not a redirect", resp.Status)
		}
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			return nil, fmt.Errorf("authorization redirect: %w", err)
		}
		q := loc.Query()
		if e := q.Get("error"); e != "" {
			return nil, fmt.Errorf("authorization refused: %s", e)
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

// runAuthorized lists the tools and calls each once: the requests the auth
// scenarios' server checks the tokens of.
func runAuthorized(ctx context.Context, srv *mcp.Server) error {
	defs, err := srv.Tools(ctx)
	if err != nil {
		return err
	}
	sess, err := srv.Open(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	for i, d := range defs {
		res, err := sess.Call(ctx, tools.Call{CallID: fmt.Sprintf("call_%d", i), Name: d.Name, Arguments: `{}`})
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		if res.IsError {
			return fmt.Errorf("%s: %s", d.Name, res.Text())
		}
	}
	return nil
}
