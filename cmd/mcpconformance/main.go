// Command mcpconformance is the client under test for the MCP conformance
// suite (npm @modelcontextprotocol/conformance): it drives loom's MCP
// client, package tools/mcp, through one scenario against the suite's mock
// server.
//
// The suite runs it as
//
//	conformance client --command "mcpconformance" --scenario NAME --spec-version 2026-07-28
//
// appending the server URL as the last argument and naming the scenario in
// MCP_CONFORMANCE_SCENARIO (MCP_CONFORMANCE_CONTEXT carries a scenario's
// extra input, such as the tool calls to make). Input requests (MRTR) are
// answered with fixed values, as a test client does: elicitation accepted
// with {"confirmed": true}, sampling with a fixed message, roots with none.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/mcp"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mcpconformance <server-url>  (scenario in MCP_CONFORMANCE_SCENARIO)")
		os.Exit(2)
	}
	url := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var conf scenarioContext
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		if err := json.Unmarshal([]byte(s), &conf); err != nil {
			fmt.Fprintf(os.Stderr, "mcpconformance: MCP_CONFORMANCE_CONTEXT: %v\n", err)
			os.Exit(2)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(ctx, logger, scenario, url, conf); err != nil {
		fmt.Fprintf(os.Stderr, "mcpconformance: scenario %q: %v\n", scenario, err)
		os.Exit(1)
	}
}

type scenarioContext struct {
	// ClientID and ClientSecret are a pre-registered client (the auth/*
	// scenarios that test pre-registration).
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	ToolCalls    []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"toolCalls"`
}

// run plays one scenario. Each scenario's mock server checks the requests
// it receives; run only has to make the right ones.
func run(ctx context.Context, logger *slog.Logger, scenario, url string, conf scenarioContext) error {
	// The suite's server listens on localhost: admit loopback, as an
	// operator would with --mcp-allow.
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1,::1,localhost"})
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.ClientOptions{Policy: policy, Logger: logger, Name: "loom-mcpconformance", Version: "1.0.0"})
	var oauth auth.OAuthHandler
	switch {
	case scenario == "auth/client-credentials-basic":
		// Not scored by the suite, but what loom serve runs for an
		// operator's client-credentials server: loom's own handler.
		cfg := &mcp.OAuthConfig{ClientID: conf.ClientID, ClientSecretEnv: "secret"}
		if err := cfg.Validate("conformance", func(string) string { return conf.ClientSecret }); err != nil {
			return err
		}
		oauth = client.NewOAuth("conformance", url, cfg)
	case strings.HasPrefix(scenario, "auth/"):
		if oauth, err = oauthHandler(client.OAuthHTTPClient(), conf); err != nil {
			return err
		}
	}
	srv, err := client.NewServer(ctx, &mcp.ServerConfig{
		OAuth:        oauth,
		Trusted:      oauth != nil,
		Label:        "conformance",
		URL:          url,
		Capabilities: mcp.Capabilities{Elicitation: true, Sampling: true, Roots: true},
		ElicitationHandler: func(context.Context, tools.InputRequest) (json.RawMessage, error) {
			return acceptElicitation, nil
		},
		SamplingHandler: func(context.Context, tools.InputRequest) (json.RawMessage, error) {
			return samplingAnswer, nil
		},
	})
	if err != nil {
		return err
	}

	if oauth != nil {
		// The auth scenarios: authorize (the first request's 401 starts
		// the flow), list, and call the server's test tool.
		return runAuthorized(ctx, srv)
	}
	switch scenario {
	case "request-metadata":
		// Opening a session is the scenario: server/discover with the
		// per-request _meta, and a retry at a supported version after -32022.
		sess, err := srv.Open(ctx)
		if err != nil {
			return err
		}
		return sess.Close()
	case "json-schema-ref-no-deref":
		// Listing must not fetch the $ref URLs in the schemas.
		_, err := srv.Tools(ctx)
		return err
	}

	defs, err := srv.Tools(ctx)
	if err != nil {
		return err
	}
	var calls []tools.Call
	switch scenario {
	case "tools_call":
		calls = []tools.Call{{Name: "add_numbers", Arguments: `{"a":5,"b":3}`}}
	case "sep-2322-client-request-state":
		for _, n := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
			calls = append(calls, tools.Call{Name: n, Arguments: `{}`})
		}
	case "http-custom-headers":
		for _, c := range conf.ToolCalls {
			args := string(c.Arguments)
			if args == "" || args == "null" {
				args = "{}"
			}
			calls = append(calls, tools.Call{Name: c.Name, Arguments: args})
		}
	case "http-invalid-tool-headers":
		// Only the tools that survived listing (invalid x-mcp-header
		// annotations are dropped) are called.
		for _, d := range defs {
			calls = append(calls, tools.Call{Name: d.Name, Arguments: `{"region":"us-west1"}`})
		}
	default:
		// http-standard-headers and any other tools scenario: call every
		// tool once.
		for _, d := range defs {
			calls = append(calls, tools.Call{Name: d.Name, Arguments: `{}`})
		}
	}

	sess, err := srv.Open(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	var errs []error
	for i, c := range calls {
		c.CallID = fmt.Sprintf("call_%d", i)
		res, err := callWithRounds(ctx, sess, srv, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
			continue
		}
		logger.Info("called", "tool", c.Name, "is_error", res.IsError, "text", res.Text())
	}
	if scenario == "tools_call" {
		return errors.Join(errs...)
	}
	// Elsewhere a failed call can be the point of the scenario (a tool the
	// server rejects); the suite's checks decide.
	for _, err := range errs {
		logger.Info("call failed", "error", err)
	}
	return nil
}

// maxRounds bounds the MRTR rounds of one call, as loom's engine does.
const maxRounds = 5

var (
	acceptElicitation = json.RawMessage(`{"action":"accept","content":{"confirmed":true}}`)
	samplingAnswer    = json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"Hello from loom"},"model":"loom-conformance","stopReason":"endTurn"}`)
)

// callWithRounds makes a call and answers its input requests until it
// completes: the loop loom's engine runs, with fixed answers.
func callWithRounds(ctx context.Context, sess tools.Session, srv *mcp.Server, call tools.Call) (tools.Result, error) {
	for round := 0; ; round++ {
		res, err := sess.Call(ctx, call)
		if err != nil || res.InputRequired == nil {
			return res, err
		}
		if round == maxRounds {
			return res, fmt.Errorf("still asking for input after %d rounds", maxRounds)
		}
		in := &tools.Input{Responses: make(map[string]json.RawMessage, len(res.InputRequired.Requests)), State: res.InputRequired.State}
		for key, req := range res.InputRequired.Requests {
			switch req.Method {
			case mcp.MethodElicit:
				in.Responses[key] = acceptElicitation
			case mcp.MethodCreateMessage:
				in.Responses[key] = samplingAnswer
			case mcp.MethodListRoots:
				in.Responses[key] = srv.Roots()
			default:
				return res, fmt.Errorf("unknown input request method %q", req.Method)
			}
		}
		call.Input = in
	}
}
