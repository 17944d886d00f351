package engine

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"context"
	"strings"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// turnResult is what one model turn ended with.
type turnResult struct {
	finish      string
	calls       []*turnCall
	serverCalls bool
	clientCalls bool
}

// turn runs one model turn, streaming its deltas into the builder, and
// adds what the model wrote to the conversation.
func (r *run) turn(ctx context.Context) (res turnResult, err error) {
	mreq := r.modelRequest()
	// One span per model turn, with the GenAI semantic conventions'
	// attributes: the model, this turn's token counts, its finish reason.
	ctx, span := r.e.tracer.Start(ctx, "chat "+mreq.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", mreq.Model),
		attribute.String("gen_ai.response.id", r.resp.ID)))
	var usage responses.Usage
	defer func() {
		span.SetAttributes(
			attribute.Int("gen_ai.usage.input_tokens", usage.InputTokens),
			attribute.Int("gen_ai.usage.output_tokens", usage.OutputTokens))
		if res.finish != "" {
			span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{res.finish}))
		}
		if err != nil {
			span.SetStatus(codes.Error, "model turn failed")
		}
		span.End()
	}()
	start := len(r.resp.Output)
	// Tool calls the engine accepted this turn, by upstream index:
	// parallel_tool_calls false admits one call, max_tool_calls caps the
	// total over the response, and a tool that was not offered is refused
	// (the model is told).
	byIndex := map[int]*turnCall{}
	maxCalls := -1
	if r.req.MaxToolCalls != nil {
		maxCalls = *r.req.MaxToolCalls
	}
	err = r.e.backend.Stream(ctx, mreq, func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaText:
			return r.builder.TextDelta(d.Text)
		case model.DeltaReasoning:
			return r.builder.ReasoningDelta(d.Text)
		case model.DeltaPreamble:
			return r.builder.PreambleDelta(d.Text)
		case model.DeltaToolCall:
			c := byIndex[d.ToolIndex]
			if c == nil && d.ToolName != "" && isBuiltin(d.ToolName) && !offers(mreq.Tools, d.ToolName) {
				// gpt-oss calls its built-in tools even when none is
				// configured: it gets told so, and the turn goes on.
				c = &turnCall{index: d.ToolIndex, callID: r.e.opts.NewID("call"), name: d.ToolName, unconfigured: true}
				byIndex[d.ToolIndex] = c
				res.calls = append(res.calls, c)
			}
			if c != nil && (c.unconfigured || c.notOffered) {
				c.item.Arguments += d.ToolArguments
				return nil
			}
			if c == nil {
				if (!mreq.ParallelToolCalls && len(byIndex) > 0) || (maxCalls >= 0 && r.calls >= maxCalls) {
					return nil
				}
				if !offers(mreq.Tools, d.ToolName) {
					// A tool that was not offered (or none at all): the
					// model is told it does not exist, the client sees
					// the call, and it counts against max_tool_calls so
					// that a model insisting on it cannot loop past the
					// budget (the turn cap bounds it otherwise).
					c = &turnCall{index: d.ToolIndex, callID: r.e.opts.NewID("call"), name: d.ToolName, notOffered: true}
					c.item.Arguments = d.ToolArguments
					byIndex[d.ToolIndex] = c
					res.calls = append(res.calls, c)
					r.calls++
					return nil
				}
				c = &turnCall{index: d.ToolIndex, callID: d.ToolCallID, name: d.ToolName}
				// local_shell runs on the client but is reported as a
				// local_shell_call item once the turn is over.
				c.deferred = d.ToolName == localShellName && hasLocalShell(r.req)
				if r.cc.IsServerTool(d.ToolName) {
					c.server = r.serverOf(d.ToolName)
					// Shell calls are reported as a call item and an
					// output item once they ran, not streamed.
					c.deferred = itemTypeOf(r.reg, c.server) == itemShellCall
					c.approval = needsApproval(r.reg, c.server, d.ToolName)
					c.deferred = c.deferred || c.approval
				}
				if c.callID == "" {
					c.callID = r.e.opts.NewID("call")
				}
				byIndex[d.ToolIndex] = c
				res.calls = append(res.calls, c)
				r.calls++
			}
			if c.deferred {
				c.item.Arguments += d.ToolArguments
				return nil
			}
			if c.server != "" {
				itemType := itemTypeOf(r.reg, c.server)
				args := d.ToolArguments
				if itemType == responses.ItemCodeInterpreterCall {
					// The client sees the code, not the model's
					// arguments ({"code": ...} on the chat path).
					if c.code == nil {
						c.code = &codeArgs{}
					}
					args = c.code.delta(args)
				}
				return r.builder.ServerCallDelta(d.ToolIndex, itemType, toolName(r.reg, c.server, c.name), c.server, args)
			}
			return r.builder.ToolCallDelta(d.ToolIndex, c.callID, c.name, d.ToolArguments)
		case model.DeltaUsage:
			r.usage.Add(d.Usage)
			usage.Add(d.Usage)
		case model.DeltaFinish:
			res.finish = d.FinishReason
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if res.finish == model.FinishLength || res.finish == model.FinishFilter {
		// The turn was cut: its open items stay open so that the
		// response's end closes them as incomplete, and no call runs.
		res.calls = nil
		return res, nil
	}
	for _, c := range res.calls {
		if c.code == nil {
			continue
		}
		if rest := c.code.flush(); rest != "" {
			if err := r.builder.ServerCallDelta(c.index, responses.ItemCodeInterpreterCall, c.name, c.server, rest); err != nil {
				return res, err
			}
		}
	}
	if err := r.builder.EndTurn(); err != nil {
		return res, err
	}
	turnItems := r.builder.TurnCalls()
	for _, c := range res.calls {
		switch {
		case c.approval:
			// The client must approve the call first: it gets an
			// approval request, and the response ends.
			req := responses.Item{Type: responses.ItemMCPApprovalRequest, ID: r.e.opts.NewID("mcpr"), ServerLabel: c.server,
				Name: toolName(r.reg, c.server, c.name), Arguments: c.item.Arguments}
			if err := r.builder.AddItem(req); err != nil {
				return res, err
			}
			r.waiting = true
			continue
		case c.deferred && c.server == "":
			item := responses.Item{Type: itemLocalShellCall, ID: r.e.opts.NewID("lsh"), CallID: c.callID,
				Action: localShellAction(c.item.Arguments), Status: responses.StatusCompleted}
			if err := r.builder.AddItem(item); err != nil {
				return res, err
			}
			res.clientCalls = true
			continue
		case c.notOffered:
			if err := r.builder.AddRefusedCall(c.callID, c.name, c.item.Arguments); err != nil {
				return res, err
			}
			res.serverCalls = true
			continue
		case c.unconfigured || c.deferred:
			res.serverCalls = true
			continue
		case c.server != "":
			res.serverCalls = true
		default:
			res.clientCalls = true
		}
		c.item, turnItems = turnItems[0], turnItems[1:]
	}
	// The model's own words of this turn join the conversation before the
	// results of the calls it made.
	for _, it := range r.resp.Output[start:] {
		if it.Type == responses.ItemMessage || it.Type == responses.ItemReasoning {
			r.cc.Append(it)
		}
	}
	return res, nil
}

// serverOf returns the label of the server offering a tool.
func (r *run) serverOf(name string) string {
	for _, d := range r.cc.Offered() {
		if d.Name == name {
			return d.Server
		}
	}
	return ""
}

// isBuiltin reports whether a tool name is one of gpt-oss's built-in
// namespaces, which the model may call without being offered them.
func isBuiltin(name string) bool {
	return name == "python" || strings.HasPrefix(name, "browser.")
}

func offers(tools []responses.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// modelRequest translates the request and the conversation so far into one
// model turn.
func (r *run) modelRequest() *model.Request {
	req := r.req
	m := &model.Request{
		Model:             req.Model,
		Items:             r.cc.Items(),
		ParallelToolCalls: req.ParallelCalls(),
		Temperature:       req.Temperature,
		TopP:              req.TopP,
		PresencePenalty:   req.PresencePenalty,
		FrequencyPenalty:  req.FrequencyPenalty,
	}
	if req.Instructions != nil {
		m.Instructions = *req.Instructions
	}
	if req.MaxOutputTokens != nil {
		m.MaxOutputTokens = *req.MaxOutputTokens
	}
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		m.ReasoningEffort = *req.Reasoning.Effort
	}
	if req.Text != nil && req.Text.Format != nil && req.Text.Format.Type != responses.FormatText {
		m.TextFormat = req.Text.Format
	}
	if req.User != nil {
		m.User = *req.User
	} else if req.SafetyIdentifier != nil {
		m.User = *req.SafetyIdentifier
	}
	m.Tools, m.ToolChoice, m.ToolChoiceFunction = offeredTools(req, r.cc.Offered())
	for _, t := range m.Tools {
		if isBuiltin(t.Name) {
			m.Builtins = append(m.Builtins, t.Name)
		}
	}
	if req.MaxToolCalls != nil && r.calls >= *req.MaxToolCalls {
		// The call budget is spent: the model can only answer.
		m.Tools, m.ToolChoice, m.ToolChoiceFunction = nil, "", ""
	}
	// Tools of servers that rename what they offer (MCP: "LABEL__tool")
	// go in a namespace per server, for backends that have namespaces
	// (harmony: the model calls "LABEL.tool", as vLLM offers MCP servers).
	// Every offered tool is placed, even when this turn hides it
	// (tool_choice, a spent budget): its earlier calls in the history
	// still render under its namespace.
	for _, d := range r.cc.Offered() {
		if d.Server == "" {
			continue
		}
		s, ok := r.reg.Server(d.Server)
		if !ok {
			continue
		}
		namer, ok := s.(ToolNamer)
		if !ok {
			continue
		}
		if m.Namespaces == nil {
			m.Namespaces = make(map[string]model.ToolRef)
		}
		m.Namespaces[d.Name] = model.ToolRef{Namespace: namespaceName(d.Server), Name: namer.ToolName(d.Name)}
	}
	return m
}

// namespaceName makes a server label safe as a harmony namespace (the
// first part of a recipient "NS.tool"): letters, digits, '_' and '-' are
// kept, anything else becomes '_' -- the rule tools/mcp uses for the
// "LABEL__" prefix of the names it offers.
func namespaceName(label string) string {
	var b strings.Builder
	for _, c := range label {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// offeredTools applies tool_choice to the tools the conversation offers:
// none offers nothing, allowed_tools narrows the list, a named function
// requires it. An empty list offers nothing whatever the choice (a model
// offered an empty list under "auto" has been seen to invent calls).
func offeredTools(req *responses.Request, defs []tools.Definition) ([]responses.Tool, string, string) {
	if len(defs) == 0 {
		return nil, "", ""
	}
	all := make([]responses.Tool, len(defs))
	for i, d := range defs {
		all[i] = d.ResponsesTool()
	}
	tc := req.ToolChoice
	if tc == nil {
		return all, responses.ToolChoiceAuto, ""
	}
	switch {
	case tc.Mode == responses.ToolChoiceNone:
		return nil, "", ""
	case tc.Function != "":
		return all, responses.ToolChoiceRequired, tc.Function
	case tc.Allowed != nil:
		var allowed []responses.Tool
		for _, t := range all {
			for _, a := range tc.Allowed {
				if a.Name == t.Name {
					allowed = append(allowed, t)
					break
				}
			}
		}
		return allowed, tc.Mode, ""
	}
	return all, tc.Mode, ""
}
