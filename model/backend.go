package model

import (
	"context"
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// Backend is an upstream inference engine. Stream sends one model turn and
// calls emit for each delta as it arrives, in order, from the calling
// goroutine. It returns when the turn ends (after a DeltaFinish), when emit
// returns an error (which Stream returns), or when ctx is done. Its
// failures are *responses.APIError values whose kind says what failed
// (ERateLimited, ETimeout, EInvalid for a request the model server
// refused or loom cannot translate, EUpstream for anything else); their
// Cause is for logs only.
type Backend interface {
	Stream(ctx context.Context, req *Request, emit func(Delta) error) error
}

// Request is one model turn, in Responses terms. Backends translate it to
// their wire format (chat messages, harmony token ids).
type Request struct {
	Model        string
	Instructions string
	// Items is the whole conversation so far: earlier turns, the new
	// input, and the items this response has produced in earlier turns.
	Items []responses.Item
	// Tools are the function tools offered to the model this turn. Empty
	// means no tool is offered at all, whatever ToolChoice says.
	Tools []responses.Tool
	// ToolChoice is none, auto or required; Function names the one tool
	// the model must call.
	ToolChoice         string
	ToolChoiceFunction string
	ParallelToolCalls  bool
	// Builtins names the offered tools that are gpt-oss built-ins
	// ("python"). They are in Tools too: a chat backend offers them as
	// functions, a harmony backend declares them as built-in namespaces
	// in the system message instead.
	Builtins []string
	// Namespaces groups offered tools (entries of Tools, by their offered
	// name) into per-server namespaces, so that tools of different
	// servers cannot collide: a harmony backend declares each namespace
	// next to the built-ins ("## NS" in the system message, as vLLM
	// declares MCP servers) and the model calls the tool as "NS.Name".
	// The offered name is still what goes out (DeltaToolCall.ToolName)
	// and what function_call items carry. Tools not in it are functions.
	// A chat backend ignores it: its functions already have unique names.
	Namespaces map[string]ToolRef

	MaxOutputTokens int // 0: no limit
	Sampling
	ReasoningEffort string // "", low, medium, high (as sent)
	TextFormat      *responses.TextFormat
	User            string
	// Extra holds engine-specific request fields, merged into the body.
	Extra map[string]json.RawMessage
	// Route places the turn on an engine of the backend's, and carries
	// the hints a router in front reads.
	Route Route

	// Whole says nobody watches the turn as it is generated (a client
	// that did not ask for a stream, a summary for compaction): the
	// backend asks the upstream for the whole answer at once (stream
	// false), which costs the engine less, and emits the same deltas, in
	// the same order, when it arrives. Usage and finish reason are the
	// streamed turn's.
	Whole bool
}

// ToolRef places an offered tool in a namespace: the model calls it as
// Namespace + "." + Name.
type ToolRef struct {
	Namespace string // e.g. a sanitised MCP server label
	Name      string // the tool's own name in that namespace
	// Client marks a namespace of the client's (a namespace tool): a
	// harmony backend declares it with the client's functions, in the
	// developer message, rather than next to the built-ins.
	Client bool
	// Description describes the namespace (a namespace tool's), for a
	// backend that declares it.
	Description string
}

// DeltaKind says what a Delta carries.
type DeltaKind uint8

// Delta kinds.
const (
	// DeltaText is assistant text for the user (Text).
	DeltaText DeltaKind = iota + 1
	// DeltaReasoning is chain-of-thought text (Text).
	DeltaReasoning
	// DeltaPreamble is text the model writes to the user before calling
	// tools (harmony's commentary channel with no recipient).
	DeltaPreamble
	// DeltaToolCall is part of a tool call: ToolIndex identifies the call
	// within the turn; the first delta of a call has ToolCallID and
	// ToolName, later ones append ToolArguments.
	DeltaToolCall
	// DeltaUsage reports token usage (Usage).
	DeltaUsage
	// DeltaFinish ends the turn (FinishReason).
	DeltaFinish
	// DeltaPause carries nothing: the upstream has nothing more buffered
	// for now, so what was emitted so far is all there is to send until
	// it writes again. A streaming writer flushes here instead of after
	// every event; anyone else ignores it.
	DeltaPause
)

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
	FinishFilter    = "content_filter"
)

// Delta is one piece of a model turn.
type Delta struct {
	Kind DeltaKind
	Text string

	ToolIndex     int
	ToolCallID    string
	ToolName      string
	ToolArguments string

	Usage        responses.Usage
	FinishReason string
}

// Sampling is a turn's sampling values. Both upstream APIs name them the
// same way, so their wire requests embed it; each value is sent only when
// the client set it, and the engine's default applies otherwise.
type Sampling struct {
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
}
