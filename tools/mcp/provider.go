package mcp

import (
	"github.com/loomgate/loom/tenant"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Elicitation policies: who answers the input an MCP server asks for.
const (
	ElicitClient  = tools.ElicitClient  // the Responses client, in a follow-up request
	ElicitModel   = tools.ElicitModel   // the model, filling the requested schema
	ElicitDecline = tools.ElicitDecline // nobody: the request is declined
)

// Provider turns a request's {"type": "mcp"} tools into servers for the
// engine (it is an engine.ToolProvider). It is built once and shared.
type Provider struct {
	Client *Client
	// Elicitation is the default policy (--mcp-elicitation); a request's
	// mcp tool may choose another with loom's "elicitation" field.
	Elicitation string
	// Roots answers roots/list for every server (none by default).
	Roots []Root
	// Named are the servers the operator configured, by server_label
	// (--mcp-servers): a request's mcp tool names one without a
	// server_url.
	Named map[string]NamedServer

	oauthMu sync.Mutex
	oauth   map[string]*OAuth // by label: one per configured server, shared by every request
}

// oauthFor returns the OAuth handler of the named server, built on first
// use and shared by every request after: its tokens are the server's.
func (p *Provider) oauthFor(named *NamedServer) *OAuth {
	p.oauthMu.Lock()
	defer p.oauthMu.Unlock()
	if h := p.oauth[named.Label]; h != nil {
		return h
	}
	if p.oauth == nil {
		p.oauth = map[string]*OAuth{}
	}
	h := p.Client.NewOAuth(named.Label, named.URL, named.OAuth)
	p.oauth[named.Label] = h
	return h
}

// Handles reports whether typ is "mcp".
func (p *Provider) Handles(typ string) bool { return typ == responses.ToolMCP }

// Servers returns one server per mcp tool of the request. A refused URL or
// header, or a malformed tool, is an invalid-request error naming the field.
func (p *Provider) Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error) {
	var out []tools.Server
	labels := map[string]bool{}
	for i, t := range req.Tools {
		if t.Type != responses.ToolMCP {
			continue
		}
		param := fmt.Sprintf("tools[%d]", i)
		m, apiErr := responses.ParseMCPTool(t, i)
		if apiErr != nil {
			return nil, apiErr
		}
		roots := p.Roots
		trusted := false
		var oauth auth.OAuthHandler
		if m.ServerURL == "" {
			named, ok := p.Named[m.ServerLabel]
			if !ok {
				return nil, responses.BadRequest(param+".server_url", "server_url is required (no server named %q is configured)", m.ServerLabel)
			}
			if !named.AllowsTenant(tenant.From(ctx)) {
				return nil, responses.BadRequest(param+".server_label", "the MCP server %q is not available to this tenant", m.ServerLabel)
			}
			if named.OAuth != nil {
				if m.Authorization != "" {
					return nil, responses.BadRequest(param+".authorization", "the MCP server %q gets its tokens by OAuth, as the operator configured it; a request cannot give one", m.ServerLabel)
				}
				oauth = p.oauthFor(&named)
			}
			// The operator's server: its URL is trusted, its credentials
			// and defaults come from the configuration; the request may
			// add headers but not replace the configured ones.
			trusted = true
			m.ServerURL = named.URL
			if m.Authorization == "" {
				m.Authorization = named.Authorization
			}
			headers := map[string]string{}
			for k, v := range m.Headers {
				headers[k] = v
			}
			for k, v := range named.Headers {
				headers[k] = v
			}
			m.Headers = headers
			if m.RequireApproval == nil {
				m.RequireApproval = named.RequireApproval
			}
			if m.Elicitation == "" {
				m.Elicitation = named.Elicitation
			}
			if len(named.Roots) > 0 {
				roots = named.Roots
			}
		}
		if labels[m.ServerLabel] {
			return nil, responses.BadRequest(param+".server_label", "server_label %q is used twice", m.ServerLabel)
		}
		labels[m.ServerLabel] = true
		policy := m.Elicitation
		if policy == "" {
			policy = p.Elicitation
		}
		if policy == "" {
			policy = ElicitClient
		}
		hook := &inputHook{label: m.ServerLabel, policy: policy, logger: p.Client.logger}
		cfg := &ServerConfig{
			Label:         m.ServerLabel,
			URL:           m.ServerURL,
			Headers:       m.Headers,
			Authorization: m.Authorization,
			Trusted:       trusted,
			Tenant:        tenant.From(ctx),
			Capabilities: Capabilities{
				Sampling:    true,
				Elicitation: policy != ElicitDecline,
				Roots:       len(roots) > 0,
			},
			Roots:              roots,
			OAuth:              oauth,
			ElicitationHandler: hook.elicit,
			SamplingHandler:    hook.sample,
		}
		if m.AllowedTools != nil && !m.AllowedTools.ReadOnly {
			cfg.AllowedTools = m.AllowedTools.Names
			if cfg.AllowedTools == nil {
				cfg.AllowedTools = []string{}
			}
		}
		srv, err := p.Client.NewServer(ctx, cfg)
		var policyErr *PolicyError
		var headerErr *HeaderError
		switch {
		case errors.As(err, &policyErr):
			return nil, responses.BadRequest(param+".server_url", "server_url is not allowed: %s", policyErr.Reason)
		case errors.As(err, &headerErr):
			field := ".headers"
			if strings.EqualFold(headerErr.Name, "Authorization") {
				field = ".authorization"
			}
			return nil, responses.BadRequest(param+field, "%v", headerErr)
		case err != nil:
			return nil, responses.BadRequest(param, "%v", err)
		}
		out = append(out, &requestServer{Server: srv, tool: m, prefix: toolPrefix(m.ServerLabel), elicitation: policy, hook: hook})
	}
	return out, nil
}

// requestServer is an MCP server as one request configured it: its tools
// are offered under the server's prefix, so that tools of different
// servers never collide, and it carries the request's approval and
// elicitation policies.
type requestServer struct {
	*Server
	tool        *responses.MCPTool
	prefix      string
	elicitation string
	hook        *inputHook
}

var _ tools.Server = (*requestServer)(nil)

// Capabilities implements tools.Server: the request's approval and
// elicitation policies, the prefixed names, and the in-session answerer
// (sampling, elicitation by the model) the engine hands it.
func (s *requestServer) Capabilities() tools.Capabilities {
	c := s.Server.Capabilities()
	c.ToolName = s.ToolName
	c.NeedsApproval = s.NeedsApproval
	c.Elicitation = s.elicitation
	c.SetInputHandler = s.SetInputHandler
	c.Deferred = s.tool.DeferLoading
	return c
}

// SetInputHandler takes the engine's answerer of in-session requests
// (sampling, elicitation by the model) for this request.
func (s *requestServer) SetInputHandler(h tools.InputHandler) {
	s.hook.handler.Store(&h)
}

// inputHook answers what a session-based server asks inside its session
// while a call runs, by the request's policy: sampling and "model"
// elicitations go to the engine's handler (the response's model), a
// "decline" elicitation is declined, and so is a "client" one: the client
// answers only in a follow-up request, which a live session cannot wait
// for.
type inputHook struct {
	label   string
	policy  string
	logger  *slog.Logger
	handler atomic.Pointer[tools.InputHandler]
}

func (h *inputHook) elicit(ctx context.Context, req tools.InputRequest) (json.RawMessage, error) {
	switch h.policy {
	case ElicitModel:
		if f := h.handler.Load(); f != nil {
			return (*f)(ctx, req)
		}
		h.logger.InfoContext(ctx, "mcp: in-session elicitation declined: no model to answer it", "mcp_server", h.label)
	case ElicitClient:
		h.logger.InfoContext(ctx, "mcp: in-session elicitation declined: the policy is client, but a session-based server elicits inside a running call, and the client can only answer in a follow-up request", "mcp_server", h.label)
	}
	return tools.Declined, nil
}

func (h *inputHook) sample(ctx context.Context, req tools.InputRequest) (json.RawMessage, error) {
	if f := h.handler.Load(); f != nil {
		return (*f)(ctx, req)
	}
	return nil, fmt.Errorf("mcp: no model to answer the sampling request of server %q", h.label)
}

// toolPrefix makes a function-name-safe prefix from a server label.
func toolPrefix(label string) string { return tools.SafeName(label) + "__" }

// Tools lists the server's tools under their offered names, filtered by
// the request's allowed_tools (read_only needs the tools' annotations).
func (s *requestServer) Tools(ctx context.Context) ([]tools.Definition, error) {
	defs, err := s.Server.Tools(ctx)
	if err != nil {
		return nil, err
	}
	out := defs[:0:0]
	for _, d := range defs {
		if !s.tool.AllowedTools.Allows(d.Name, readOnly(d)) {
			continue
		}
		d.Name = s.prefix + d.Name
		out = append(out, d)
	}
	return out, nil
}

func readOnly(d tools.Definition) bool {
	return strings.Contains(strings.ReplaceAll(string(d.Annotations()), " ", ""), `"readOnlyHint":true`)
}

// Open opens a session that calls tools by their MCP names.
func (s *requestServer) Open(ctx context.Context) (tools.Session, error) {
	sess, err := s.Server.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &requestSession{Session: sess, prefix: s.prefix}, nil
}

// ToolName returns the MCP name of an offered tool name.
func (s *requestServer) ToolName(offered string) string {
	return strings.TrimPrefix(offered, s.prefix)
}

// NeedsApproval reports whether a call to the (MCP-named) tool needs the
// client's approval, by the request's require_approval.
func (s *requestServer) NeedsApproval(tool string) bool {
	return s.tool.RequireApproval.Needs(tool)
}

// ElicitationPolicy is who answers the server's elicitations.
func (s *requestServer) ElicitationPolicy() string { return s.elicitation }

type requestSession struct {
	tools.Session
	prefix string
}

func (s *requestSession) Call(ctx context.Context, c tools.Call) (tools.Result, error) {
	c.Name = strings.TrimPrefix(c.Name, s.prefix)
	return s.Session.Call(ctx, c)
}
