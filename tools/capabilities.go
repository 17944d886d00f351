package tools

import (
	"context"
	"encoding/json"
)

// Capabilities is what a Server can do beyond listing and running tools,
// declared by the server itself (Server.Capabilities) rather than
// discovered by the engine: the zero value declares nothing, which is
// right for a plain server whose calls are mcp_call items.
type Capabilities struct {
	// Kind says how the server's calls are presented to the client and
	// go back to the model; nil means KindMCP.
	Kind *Kind
	// ToolName maps an offered name to the server's own name of the tool
	// (MCP tools are offered with their server's prefix); nil means the
	// names are the same.
	ToolName func(offered string) string
	// NeedsApproval reports whether a call to the tool (the server's own
	// name) waits for the client's approval; nil means never.
	NeedsApproval func(tool string) bool
	// Elicitation is who answers the server's elicitations: ElicitClient
	// (also for ""), ElicitModel or ElicitDecline.
	Elicitation string
	// Roots is the ListRootsResult that answers roots/list; nil means no
	// roots.
	Roots json.RawMessage
	// SetInputHandler, if set, takes the answerer of what the server asks
	// inside a running call (a session-based MCP server's in-session
	// sampling and elicitation). The handler may be called from any
	// goroutine while a call of the response runs.
	SetInputHandler func(InputHandler)
	// URL is where the server is (MCP), "" for a local server: a call
	// resumed in a follow-up must go to the server at the same URL, so its
	// requestState never goes to another server.
	URL string
	// Deferred keeps the server's tools out of the prompt until a tool
	// search finds the server (defer_loading).
	Deferred bool
}

// InputHandler answers one input request a server makes inside a running
// call, with the result the method asks for.
type InputHandler func(ctx context.Context, req InputRequest) (json.RawMessage, error)

// Elicitation policies: who answers the input a server asks for.
const (
	ElicitClient  = "client"  // the Responses client, in a follow-up request
	ElicitModel   = "model"   // the model, filling the requested schema
	ElicitDecline = "decline" // nobody: the request is declined
)

// Declined is the ElicitResult of an elicitation nobody answers.
var Declined = json.RawMessage(`{"action":"decline"}`)

// Input request methods (MCP).
const (
	MethodElicit        = "elicitation/create"
	MethodCreateMessage = "sampling/createMessage"
	MethodListRoots     = "roots/list"
)

// KindOf returns the kind of a server's calls.
func (c Capabilities) KindOf() *Kind {
	if c.Kind == nil {
		return KindMCP
	}
	return c.Kind
}

// OwnName returns the server's own name of a tool offered as offered.
func (c Capabilities) OwnName(offered string) string {
	if c.ToolName == nil {
		return offered
	}
	return c.ToolName(offered)
}

// Approval reports whether a call to the tool offered as offered waits
// for the client's approval.
func (c Capabilities) Approval(offered string) bool {
	return c.NeedsApproval != nil && c.NeedsApproval(c.OwnName(offered))
}

// ElicitationPolicy is the effective elicitation policy: unknown values and
// "" mean ElicitClient.
func (c Capabilities) ElicitationPolicy() string {
	switch c.Elicitation {
	case ElicitModel, ElicitDecline:
		return c.Elicitation
	}
	return ElicitClient
}

// RootsResult is the ListRootsResult to answer roots/list with.
func (c Capabilities) RootsResult() json.RawMessage {
	if len(c.Roots) == 0 {
		return json.RawMessage(`{"roots":[]}`)
	}
	return c.Roots
}
