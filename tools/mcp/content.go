package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/tools"
)

// Input request methods (SEP-2322).
const (
	MethodElicit        = tools.MethodElicit
	MethodCreateMessage = tools.MethodCreateMessage
	MethodListRoots     = tools.MethodListRoots
)

// result converts a tools/call result, keeping every content block (vLLM
// kept only the first text block): text as Text, everything else (image,
// audio, resource_link, resource, ...) with its JSON in Raw; text blocks
// with annotations or _meta keep their JSON too.
func result(callID string, res *mcpsdk.CallToolResult) (tools.Result, error) {
	out := tools.Result{CallID: callID, IsError: res.IsError}
	if res.NeedsInput() {
		ir, err := inputRequired(res)
		if err != nil {
			return tools.Result{}, err
		}
		out.InputRequired = ir
		return out, nil
	}
	if len(res.Content) > 0 {
		out.Content = make([]tools.Content, 0, len(res.Content))
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcpsdk.TextContent); ok && t.Annotations == nil && len(t.Meta) == 0 {
			out.Content = append(out.Content, tools.Text(t.Text))
			continue
		}
		raw, err := json.Marshal(c)
		if err != nil {
			return tools.Result{}, fmt.Errorf("mcp: encoding a %T content block: %w", c, err)
		}
		part := tools.Content{Type: contentType(c, raw), Raw: raw}
		if t, ok := c.(*mcpsdk.TextContent); ok {
			part.Text = t.Text
		}
		out.Content = append(out.Content, part)
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return tools.Result{}, fmt.Errorf("mcp: encoding structuredContent: %w", err)
		}
		out.Structured = raw
	}
	return out, nil
}

func contentType(c mcpsdk.Content, raw json.RawMessage) string {
	switch c.(type) {
	case *mcpsdk.TextContent:
		return tools.ContentText
	case *mcpsdk.ImageContent:
		return "image"
	case *mcpsdk.AudioContent:
		return "audio"
	case *mcpsdk.ResourceLink:
		return "resource_link"
	case *mcpsdk.EmbeddedResource:
		return "resource"
	}
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &t)
	return t.Type
}

// inputRequired converts an input_required result. The SDK has decoded
// the requests into typed params; encoding the map back gives each
// request's params in the wire form (the elicitation mode made explicit).
func inputRequired(res *mcpsdk.CallToolResult) (*tools.InputRequired, error) {
	ir := &tools.InputRequired{Requests: make(map[string]tools.InputRequest, len(res.InputRequests)), State: res.RequestState}
	if len(res.InputRequests) == 0 {
		return ir, nil
	}
	raw, err := json.Marshal(res.InputRequests)
	if err != nil {
		return nil, fmt.Errorf("mcp: encoding input requests: %w", err)
	}
	var wire map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, fmt.Errorf("mcp: decoding input requests: %w", err)
	}
	for k, r := range wire {
		if len(r.Params) == 0 {
			r.Params = json.RawMessage("{}")
		}
		ir.Requests[k] = tools.InputRequest{Method: r.Method, Params: r.Params}
	}
	return ir, nil
}

// rawInputResponse sends an answer exactly as the engine wrote it. The
// SDK's InputResponse interface is sealed to its result types; embedding
// one satisfies it, and MarshalJSON puts the engine's bytes on the wire,
// so fields the SDK does not model reach the server too.
type rawInputResponse struct {
	*mcpsdk.ElicitResult
	raw json.RawMessage
}

func (r rawInputResponse) MarshalJSON() ([]byte, error) { return r.raw, nil }

// InputError reports an invalid answer to an input request, the engine's
// (or its client's) fault.
type InputError struct {
	Key    string
	Reason string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("mcp: input response %q: %s", e.Key, e.Reason)
}

func inputResponses(in map[string]json.RawMessage) (mcpsdk.InputResponseMap, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(mcpsdk.InputResponseMap, len(in))
	for k, raw := range in {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, &InputError{Key: k, Reason: "not a JSON object"}
		}
		out[k] = rawInputResponse{raw: raw}
	}
	return out, nil
}

// legacyElicit adapts the engine's hook to the SDK's handler for the
// elicitation/create a session-based server sends during a call. Without
// a hook it declines: the engine's "client" policy cannot wait across
// HTTP requests inside a live session.
func (s *Server) legacyElicit(h InputHandler) func(context.Context, *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
	return func(ctx context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
		if h == nil {
			return &mcpsdk.ElicitResult{Action: "decline"}, nil
		}
		var res mcpsdk.ElicitResult
		if err := s.answer(ctx, h, MethodElicit, req.Params, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
}

// legacySample adapts the engine's hook to the SDK's sampling handler.
func (s *Server) legacySample(h InputHandler) func(context.Context, *mcpsdk.CreateMessageRequest) (*mcpsdk.CreateMessageResult, error) {
	return func(ctx context.Context, req *mcpsdk.CreateMessageRequest) (*mcpsdk.CreateMessageResult, error) {
		if h == nil {
			return nil, fmt.Errorf("mcp: loom does not answer sampling for server %q", s.label)
		}
		var res mcpsdk.CreateMessageResult
		if err := s.answer(ctx, h, MethodCreateMessage, req.Params, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
}

func (s *Server) answer(ctx context.Context, h InputHandler, method string, params any, into any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	raw, err := h(ctx, tools.InputRequest{Method: method, Params: p})
	if err != nil {
		s.logger.WarnContext(ctx, "mcp: in-session request not answered", "method", method, "error", err)
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("mcp: the answer to %s does not decode: %w", method, err)
	}
	return nil
}
