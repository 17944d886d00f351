package engine

import (
	"context"
	"slices"
	"time"

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
	// asyncCalls: the client's calls of the turn are all of async tools,
	// which the response goes on past.
	asyncCalls bool
	// start is where the turn's output begins in the response's.
	start int
}

// turnState is what one turn owns while the model streams: the tool calls
// the engine accepted this turn, by upstream index. parallel_tool_calls
// false admits one call, max_tool_calls caps the total over the response,
// and a tool that was not offered is refused (the model is told).
type turnState struct {
	mreq     *model.Request
	byIndex  map[int]*turnCall // made at the turn's first call
	maxCalls int
	res      turnResult
	// usage is this turn's, for its span.
	usage responses.Usage
	// spoke is set once the upstream has sent anything this turn; that
	// first delta is flushed at once. A pause before it is the wait for
	// the upstream's first bytes: the events built before the call
	// (response.created, a previous turn's call results) are left to go
	// out with the first delta, or by the sink's own deadline, instead of
	// costing a write of their own on the way to it.
	spoke bool
}

// turn runs one model turn, streaming its deltas into the builder, and,
// when the model made calls, adds what it wrote to the conversation.
func (r *run) turn(ctx context.Context) (res turnResult, err error) {
	st := &turnState{mreq: r.modelRequest(), maxCalls: -1}
	// One chat span per model turn (genai.go); its attributes are built
	// in functions of their own, as this frame is under the upstream's
	// stream for as long as it runs.
	// The calls of the turn and its approval requests belong to the
	// response (outer), beside the turn.
	outer := ctx
	ctx, cs := r.startChat(ctx, st.mreq, "")
	start := len(r.resp.Output)
	defer func() { r.endChat(cs, st.mreq.Model, st.usage, res.finish, r.resp.Output[start:], err) }()
	if r.req.MaxToolCalls != nil {
		st.maxCalls = *r.req.MaxToolCalls
	}
	st.res.start = start
	defer r.timeTurn(st, start, time.Now(), &err)
	err = r.e.backend.Stream(ctx, st.mreq, func(d model.Delta) error {
		if d.Kind == model.DeltaPause {
			if st.spoke {
				r.flush()
			}
			return nil
		}
		if err := r.take(st, d); err != nil {
			return err
		}
		if !st.spoke {
			// The turn's first words go out at once, with the events
			// built before the call: when the upstream is ahead of loom
			// (a burst), coalescing would hold them until loom caught up
			// or the writer's deadline passed.
			st.spoke = true
			r.flush()
		}
		return nil
	})
	// The turn's events go out before its calls run.
	r.flush()
	res = st.res
	if err != nil {
		return res, err
	}
	if res.finish == model.FinishLength || res.finish == model.FinishFilter {
		// The turn was cut: its open items stay open so that the
		// response's end closes them as incomplete, and no call runs.
		res.calls = nil
		return res, nil
	}
	if err := r.endTurn(outer, &res); err != nil {
		return res, err
	}
	r.clientCallSpans(outer, res.calls)
	if len(res.calls) == 0 {
		// A turn without calls is the response's last (run.loop), and
		// nothing reads the conversation after it: its words are not
		// added (which would copy a long history that has no room left).
		return res, nil
	}
	// The model's own words of this turn join the conversation before the
	// results of the calls it made: the next turn reads them there, as
	// does a server's sampling during those calls.
	r.keepWords(start)
	return res, nil
}

// keepWords adds the model's words (messages, reasoning) of the output
// from start on to the conversation, for the next turn to read.
func (r *run) keepWords(start int) {
	for _, it := range r.resp.Output[start:] {
		if it.Type == responses.ItemMessage || it.Type == responses.ItemReasoning {
			r.cc.Append(it)
		}
	}
}

// timeTurn adds the turn that started at began, its output items from
// first on, to the run's timeline.
func (r *run) timeTurn(st *turnState, first int, began time.Time, err *error) {
	step := TimelineStep{Kind: StepTurn, Name: st.mreq.Model, Engine: r.engine,
		InputTokens: st.usage.InputTokens, CachedTokens: st.usage.InputTokensDetails.CachedTokens,
		OutputTokens: st.usage.OutputTokens, Error: errorText(*err)}
	for _, it := range r.resp.Output[min(first, len(r.resp.Output)):] {
		step.ItemIDs = append(step.ItemIDs, it.ID)
	}
	r.timeline.add(step, began, time.Now())
}

// take passes one delta of the model's stream (not a pause) to the
// builder or the turn's state.
func (r *run) take(st *turnState, d model.Delta) error {
	switch d.Kind {
	case model.DeltaText:
		return r.builder.TextDelta(d.Text)
	case model.DeltaReasoning:
		return r.builder.ReasoningDelta(d.Text)
	case model.DeltaPreamble:
		return r.builder.PreambleDelta(d.Text)
	case model.DeltaToolCall:
		return r.toolCallDelta(st, d)
	case model.DeltaUsage:
		r.usage.add(d.Usage)
		st.usage.Add(d.Usage)
	case model.DeltaFinish:
		st.res.finish = d.FinishReason
	}
	return nil
}

// toolCallDelta takes one piece of a tool call the model streams.
func (r *run) toolCallDelta(st *turnState, d model.Delta) error {
	c := st.byIndex[d.ToolIndex]
	if c == nil {
		c = r.newCall(st, d)
		if c == nil {
			return nil
		}
		if st.byIndex == nil {
			st.byIndex = make(map[int]*turnCall)
		}
		st.byIndex[d.ToolIndex] = c
		st.res.calls = append(st.res.calls, c)
		if !c.unconfigured {
			r.calls++
		}
	}
	if c.unconfigured || c.notOffered || c.deferred {
		c.item.EditCall().Arguments += d.ToolArguments
		return nil
	}
	if c.server == "" && (c.client.def.Name != "" || c.async) {
		return r.clientCallDelta(c, d.ToolArguments, false)
	}
	if c.server == "" {
		return r.builder.ToolCallDelta(d.ToolIndex, c.callID, c.name, d.ToolArguments)
	}
	args := d.ToolArguments
	if c.args != nil {
		// The client sees what the kind shows of the arguments (the
		// code of a python call, not its {"code": ...}).
		args = c.args.Delta(args)
	}
	return r.builder.ServerCallDelta(d.ToolIndex, c.kind.ItemType, r.caps(c.server).OwnName(c.name), c.server, args)
}

// newCall accepts the first piece of a tool call, or returns nil when the
// call is dropped (one call only, or the call budget is spent).
func (r *run) newCall(st *turnState, d model.Delta) *turnCall {
	offered := offers(st.mreq.Tools, d.ToolName)
	switch {
	case d.ToolName != "" && tools.Builtin(d.ToolName) && !offered:
		// gpt-oss calls its built-in tools even when none is
		// configured: it gets told so, and the turn goes on.
		return &turnCall{index: d.ToolIndex, callID: r.e.opts.NewID("call"), name: d.ToolName, unconfigured: true}
	case (!st.mreq.ParallelToolCalls && len(st.byIndex) > 0) || (st.maxCalls >= 0 && r.calls >= st.maxCalls):
		return nil
	case !offered:
		// A tool that was not offered (or none at all): the model is
		// told it does not exist, the client sees nothing of it, and it
		// counts against max_tool_calls so that a model insisting on it
		// cannot loop past the budget (the turn cap bounds it otherwise).
		return &turnCall{index: d.ToolIndex, callID: r.e.opts.NewID("call"), name: d.ToolName, notOffered: true}
	}
	c := &turnCall{index: d.ToolIndex, callID: d.ToolCallID, name: d.ToolName}
	if ct, ok := r.clientTools[d.ToolName]; ok {
		// A client-run kind is reported as its own item, once the turn
		// is over (local_shell, apply_patch) or as the model writes it
		// (custom); a namespace's function as a function_call with its
		// namespace.
		c.client, c.kind = ct, ct.kind
		if k := ct.kind; k != nil {
			c.deferred = k.Deferred
			if k.NewArguments != nil && !k.Deferred {
				c.args = k.NewArguments()
			}
		}
	}
	if r.cc.IsServerTool(d.ToolName) {
		c.server = r.serverOf(d.ToolName)
		caps := r.caps(c.server)
		c.kind = caps.KindOf()
		c.approval = caps.Approval(d.ToolName)
		c.deferred = c.kind.Deferred || c.approval
		if c.kind.NewArguments != nil && !c.deferred {
			c.args = c.kind.NewArguments()
		}
	}
	if c.callID == "" {
		c.callID = r.e.opts.NewID("call")
	}
	c.async = c.server == "" && !c.deferred && r.asyncTools[d.ToolName]
	return c
}

// endTurn closes the turn's items once the model is done: the rest of
// the arguments the client has not seen, the items of calls reported only
// now, and each call matched to its item.
func (r *run) endTurn(ctx context.Context, res *turnResult) error {
	for _, c := range res.calls {
		if c.args == nil || c.deferred {
			continue
		}
		rest := c.args.Flush()
		if rest == "" {
			continue
		}
		var err error
		if c.server == "" {
			err = r.clientCallDelta(c, rest, true)
		} else {
			err = r.builder.ServerCallDelta(c.index, c.kind.ItemType, c.name, c.server, rest)
		}
		if err != nil {
			return err
		}
	}
	if err := r.builder.EndTurn(); err != nil {
		return err
	}
	turnItems := r.builder.TurnCalls()
	for _, c := range res.calls {
		streamed, err := r.reportCall(ctx, c, res)
		if err != nil {
			return err
		}
		if streamed {
			c.item, turnItems = turnItems[0], turnItems[1:]
		}
	}
	return nil
}

// reportCall reports a call of the turn and notes what it leaves to do.
// It returns whether the call streamed an item of its own.
func (r *run) reportCall(ctx context.Context, c *turnCall, res *turnResult) (bool, error) {
	switch {
	case c.approval:
		// The client must approve the call first: it gets an approval
		// request, and the response ends.
		req := responses.Item{Type: responses.ItemMCPApprovalRequest, ID: r.e.opts.NewID("mcpr"), Tool: &responses.ItemTool{ServerLabel: c.server},
			Call: &responses.ItemCall{Name: r.caps(c.server).OwnName(c.name), Arguments: c.item.CallFields().Arguments}}
		if err := r.builder.AddItem(req); err != nil {
			return false, err
		}
		approvalAsked(ctx, c.server, c.name, req.ID)
		r.waiting = true
		return false, nil
	case c.deferred && c.server == "":
		// A client-run kind: the client runs it and comes back.
		if err := r.builder.AddItem(c.kind.ClientItem(c.callID, c.item.CallFields().Arguments, r.e.opts.NewID)); err != nil {
			return false, err
		}
		res.clientCalls = true
		return false, nil
	case c.notOffered:
		// No item: every client runs the function_calls it is shown
		// (the Agents SDK fails the run on one it has no tool for), and
		// there is nothing to run. The model is told (runServerCalls).
		r.e.log.Info("the model called a tool the request did not offer", "response", r.resp.ID, "tool", c.name)
		res.serverCalls = true
		return false, nil
	case c.unconfigured || c.deferred:
		res.serverCalls = true
		return false, nil
	case c.server != "":
		res.serverCalls = true
	case c.async:
		res.asyncCalls = true
	default:
		res.clientCalls = true
	}
	return true, nil
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
		Sampling:          model.Sampling{Temperature: req.Temperature, TopP: req.TopP, PresencePenalty: req.PresencePenalty, FrequencyPenalty: req.FrequencyPenalty},
		// A client that did not ask for a stream, in a response nobody
		// can follow, gets its turns from non-streamed upstream calls.
		Whole: r.sink == nil && !r.background,
		Route: r.route(),
	}
	m.Route.Served = r.servedBy
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
	m.Tools, m.ToolChoice, m.ToolChoiceFunction = r.offeredTools()
	// By index: a hundred tools copied one by one were microseconds.
	for i := range m.Tools {
		if name := m.Tools[i].Name; tools.Builtin(name) {
			m.Builtins = append(m.Builtins, name)
		}
	}
	if r.asyncCalled && m.ToolChoice == responses.ToolChoiceRequired {
		// The call tool_choice asked for was made, an async one: the
		// continuation may answer without another (which a required
		// choice would force, turn after turn, up to the cap).
		m.ToolChoice, m.ToolChoiceFunction = responses.ToolChoiceAuto, ""
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
	offered := r.cc.Offered()
	for i := range offered {
		d := &offered[i]
		if d.Server == "" {
			continue
		}
		caps := r.caps(d.Server)
		if caps.ToolName == nil {
			continue
		}
		if m.Namespaces == nil {
			m.Namespaces = make(map[string]model.ToolRef)
		}
		m.Namespaces[d.Name] = model.ToolRef{Namespace: tools.SafeName(d.Server), Name: caps.ToolName(d.Name)}
	}
	// The tools of the client's namespace tools go in their namespace
	// too, declared where the client's functions are (harmony: the
	// developer message).
	for i := range offered {
		if len(r.clientTools) == 0 {
			break
		}
		d := &offered[i]
		if ct, ok := r.clientTools[d.Name]; ok && ct.def.Namespace != "" {
			if m.Namespaces == nil {
				m.Namespaces = make(map[string]model.ToolRef)
			}
			m.Namespaces[d.Name] = model.ToolRef{Namespace: ct.def.Namespace, Name: ct.own(), Client: true, Description: ct.namespace}
		}
	}
	return m
}

// toolsAsSent returns the request's tools when the model is offered
// exactly them, in order: function tools only, none deferred, no server
// tools, no function found by an earlier tool search. The upstream then
// takes them as the request gave them (backends only read Tools), not a
// copy of each made from its definition every turn.
func toolsAsSent(req *responses.Request, reg *tools.Registry) []responses.Tool {
	if len(reg.Servers()) > 0 || len(reg.Functions()) != len(req.Tools) {
		return nil
	}
	for i := range req.Tools {
		if t := &req.Tools[i]; t.Type != responses.ToolFunction || t.DeferLoading || t.IsAsync() {
			// (An async tool's description is offered with a hint.)
			return nil
		}
	}
	return slices.Clip(req.Tools)
}

// offeredTools applies tool_choice to the tools the conversation offers:
// none offers nothing, allowed_tools narrows the list, a named function
// requires it. An empty list offers nothing whatever the choice (a model
// offered an empty list under "auto" has been seen to invent calls).
func (r *run) offeredTools() ([]responses.Tool, string, string) {
	defs := r.visibleTools()
	if len(defs) == 0 {
		return nil, "", ""
	}
	all := r.toolsAsSent
	if len(all) != len(defs) {
		all = make([]responses.Tool, len(defs))
		for i := range defs {
			all[i] = defs[i].ResponsesTool()
		}
	}
	tc := r.req.ToolChoice
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
