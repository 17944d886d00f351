// Package mcp is loom's MCP client: a tools.Server and tools.Session over
// the official go-sdk (github.com/modelcontextprotocol/go-sdk), for remote
// MCP servers over streamable HTTP.
//
// A Client is built once and shared: one HTTP connection pool whose dialer
// enforces the SSRF Policy, retries, and the tool-list Cache. Retries follow
// loom's one retry rule (internal/httpretry, with go-retryablehttp's
// capped DefaultBackoff) for a request that may not reach the server
// twice: only a connection that never opened, 429 and 503, never a
// Policy refusal, and only for bodies the SDK lets be sent again
// (GetBody); a request that gives up leaves the pool's connections to
// the other servers alone. A Server is built per request
// with Client.NewServer from the request's mcp tool (label, URL, headers,
// authorization, allowed tools) and carries that request's credentials: a
// context-aware transport attaches them to that server's requests only.
//
// Protocol. Sessions try the stateless 2026-07-28 protocol first
// (server/discover) and fall back, as the SDK does, to the session-based
// 2025-11-25 handshake (initialize, Mcp-Session-Id, DELETE on close). A URL
// found to be legacy is remembered for a while, so later sessions skip the
// probe.
//
// Multi-round requests (MRTR, SEP-2322). The SDK's automatic rounds are
// off: loom's engine runs them, because the answers come from the model
// (sampling, elicitation by policy), from the Responses client (elicitation
// in a follow-up request, perhaps on another replica) or from configuration
// (roots). A call answered with input_required returns a tools.Result whose
// InputRequired holds the requests, keyed as the server keyed them, with
// raw params (tools.InputRequest's Elicitation and Sampling decode them
// into typed values), and the opaque requestState; the retry is the same tools.Call
// with Input (answers under the same keys, the state byte for byte).
// Session-based servers instead send elicitation and sampling as requests
// inside their session while the call runs; ServerConfig's
// ElicitationHandler and SamplingHandler answer those, with the same raw
// shapes.
//
// Errors the engine maps to a 400: *PolicyError (a refused server URL) and
// *HeaderError (a header the request may not send), both from NewServer;
// a *PolicyError can also surface at dial time, wrapped in a *ServerError,
// if DNS changed in between. *InputError is an invalid MRTR answer.
package mcp
