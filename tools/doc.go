// Package tools defines what loom needs from a tool: the interfaces the
// conversation context consumes, the values that cross them, and a per-request
// Registry of what a request may use.
//
// A Server is something that executes tools on loom's side: a remote MCP
// server (stateless 2026-07-28 or session-based), the local Python
// interpreter, a shell. It says what it offers (Tools) and opens a Session.
// A Session carries the calls of one response and ends in two steps that are
// deliberately separate:
//
//   - Cleanup is the per-session cleanup request sent once at the end of a
//     response to a session whose tools were called (MCP cleanup_session,
//     killing an interpreter's state). It needs the session alive.
//   - Close releases the session (the transport, the process). It is always
//     the last thing done to a session.
//
// Who calls them and in what order is not this package's business; package
// conversation owns that lifecycle (lazy open, one bounded cleanup pass over
// the called sessions, then closes in reverse order of opening).
//
// Function tools from the request are client-executed: they are Definitions
// with no Server, registered so the model is offered them, but never called
// here. So are the client-run kinds (local_shell, apply_patch, custom), each
// offered as the function its Define gives and reported as its own item,
// and the tools of a namespace tool, Definitions whose Namespace is set.
// A tool search with execution "client" is a client-run kind too
// (KindToolSearch); run by loom (tools/toolsearch), it answers from the
// Definitions marked Deferred (defer_loading), which the engine keeps out
// of the prompt until a search found them (Found). The web search tool
// (tools/websearch) is a Server whose calls are KindWebSearch's.
//
// A Server declares what it can do beyond that in Capabilities (approvals,
// renamed tools, elicitation policy, roots, an in-session input handler,
// its URL) and the Kind of its calls. A Kind is one type of tool call as the
// client and the model see it: its item type, how its arguments stream,
// the items a call that ran builds, and how they go back into the model's
// history. Each kind is one file (kind_*.go) that registers it; the engine
// runs kinds without knowing any.
//
// A Result can carry an InputRequired state for MCP multi-round requests
// (MRTR): the server needs answers (elicitation, sampling, roots) before it
// can finish the call, and the caller retries the same Call with Input. This
// package carries that state and decodes its requests into typed values
// (InputRequest.Elicitation, InputRequest.Sampling); running rounds is the
// caller's job.
package tools
