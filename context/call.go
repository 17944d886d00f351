package conversation

import (
	"github.com/loomgate/loom/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomgate/loom/tools"
	"github.com/sourcegraph/conc/pool"
)

// Call runs the server-tool calls of one model turn and returns their
// results in call order. The calls run concurrently, at most
// Options.CallConcurrency at a time.
//
// A server's session opens the first time one of its tools is called and is
// reused for every later call in the response. Every failure (unknown tool,
// a session that cannot open, an error, a panic, a timeout, ctx cancelled,
// the Context closed) comes back as a Result with IsError and Err set and
// words for the model; Call itself never fails. Call runs Init first if it
// has not run.
func (c *Context) Call(ctx context.Context, calls []tools.Call) []tools.Result {
	if len(calls) == 0 {
		return nil
	}
	// Init's error is the Engine's to report; here an unlisted tool is
	// simply unknown.
	_ = c.Init(ctx)
	results := make([]tools.Result, len(calls))
	if len(calls) == 1 {
		results[0] = c.timedCall(ctx, calls[0])
		return results
	}
	p := pool.New().WithMaxGoroutines(c.opts.CallConcurrency)
	for i := range calls {
		// Each task writes only its own slot, so results keep call order
		// whatever order the calls finish in.
		p.Go(func() { results[i] = c.timedCall(ctx, calls[i]) })
	}
	p.Wait()
	return results
}

// timedCall is call, its result stamped with when it ran (the run's
// timeline).
func (c *Context) timedCall(ctx context.Context, call tools.Call) tools.Result {
	start := time.Now()
	res := c.call(ctx, call)
	res.Start, res.End = start, time.Now()
	return res
}

func (c *Context) call(ctx context.Context, call tools.Call) tools.Result {
	st := c.serverFor(call.Name)
	label := ""
	if st != nil {
		label = st.label
	}
	// One span per call, named as the GenAI conventions name tool
	// execution, with the server that ran it; opening the server's
	// session on the first call is part of it.
	ctx, span := c.startCallSpan(ctx, call, label)
	defer span.End()
	if st == nil {
		failCallSpan(span, "unknown_tool")
		return tools.ErrorResult(call.CallID,
			fmt.Sprintf("Tool %q is not available.", call.Name),
			fmt.Errorf("%w: %q", tools.ErrUnknownTool, call.Name))
	}
	sess, err := c.session(ctx, st)
	if err != nil {
		failCallSpan(span, sessionOutcome(err))
		return tools.ErrorResult(call.CallID,
			fmt.Sprintf("Tool %q is unavailable: could not connect to its server %q.", call.Name, st.label), err)
	}
	if !c.markCalled(st, call.Name) {
		failCallSpan(span, Failed.String())
		return tools.ErrorResult(call.CallID, "The response has ended; the tool was not called.",
			&SessionError{Op: OpCall, Server: st.label, Tools: []string{call.Name}, Outcome: Failed, Err: tools.ErrClosed})
	}
	if c.opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
	}
	res, err := guarded(&c.running, ctx, func(ctx context.Context) (tools.Result, error) { return sess.Call(ctx, call) }, nil)
	outcome := outcomeOf(err)
	c.observe(OpCall, st.label, outcome)
	if err == nil {
		res.CallID = call.CallID
		c.endCallSpan(span, &res)
		return res
	}
	failCallSpan(span, outcome.String())
	e := &SessionError{Op: OpCall, Server: st.label, Tools: []string{call.Name}, Outcome: outcome, Err: err}
	if outcome == TimedOut {
		e.Timeout = c.opts.CallTimeout
	}
	c.logFailure(ctx, e)
	return tools.ErrorResult(call.CallID, modelMessage(call.Name, outcome, err), e)
}

// Attributes of a tool call's span that no semantic convention names.
const (
	attrToolServer    = attribute.Key("loom.tool.server")
	attrToolRetry     = attribute.Key("loom.tool.retry")
	attrInputRequired = attribute.Key("loom.tool.input_required")
)

// toolTypeExtension is the gen_ai.tool.type of every tool loom runs: the
// conventions' "extension", a tool executed on the agent's side
// (semconv v1.41.0 gives examples, not constants, for this attribute).
const toolTypeExtension = "extension"

// startCallSpan starts the execute_tool span of a call.
func (c *Context) startCallSpan(ctx context.Context, call tools.Call, server string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(call.Name),
		semconv.GenAIToolCallID(call.CallID),
		semconv.GenAIToolType(toolTypeExtension),
		attrToolServer.String(server),
		attrToolRetry.Bool(call.Input != nil),
	}
	if c.opts.CaptureContent {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(call.Arguments))
	}
	return c.tracer.Start(ctx, semconv.GenAIOperationNameExecuteTool.Value.AsString()+" "+call.Name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endCallSpan records the result of a call that returned: a tool's own
// error is error.type "tool_error" (as the MCP conventions name an
// isError result).
func (c *Context) endCallSpan(span trace.Span, res *tools.Result) {
	if !span.IsRecording() {
		return
	}
	switch {
	case res.InputRequired != nil:
		span.SetAttributes(attrInputRequired.Bool(true))
	case res.IsError:
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "tool_error")
	}
	if c.opts.CaptureContent && res.InputRequired == nil {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(res.Text()))
	}
}

// failCallSpan records that a call failed, with its error.type: the
// outcome of a call loom could not finish (error, timeout, canceled,
// panic), or unknown_tool.
func failCallSpan(span trace.Span, errorType string) {
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
	span.SetStatus(codes.Error, errorType)
}

// sessionOutcome is the outcome of a session that did not open.
func sessionOutcome(err error) string {
	var se *SessionError
	if errors.As(err, &se) {
		return se.Outcome.String()
	}
	return Failed.String()
}

// modelMessage says why a call failed in words for the model. Panics and
// timeouts are described, not quoted: their details are loom's, not the
// model's. A tool's own error is quoted, as tools.Session asks it to be fit
// for that.
func modelMessage(name string, o Outcome, err error) string {
	switch o {
	case Panicked:
		return fmt.Sprintf("Tool %q failed with an internal error.", name)
	case TimedOut:
		return fmt.Sprintf("Tool %q timed out.", name)
	case Canceled:
		return fmt.Sprintf("The call to tool %q was cancelled.", name)
	}
	return fmt.Sprintf("Tool %q failed: %v", name, err)
}

// session returns st's session, opening it on first use. Concurrent first
// calls share one Open.
func (c *Context) session(ctx context.Context, st *serverState) (tools.Session, error) {
	st.openMu.Lock()
	defer st.openMu.Unlock()
	if st.tried {
		return st.session, st.openErr
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		// Not remembered: this is not the server's fault.
		return nil, &SessionError{Op: OpOpen, Server: st.label, Outcome: Failed, Err: tools.ErrClosed}
	}

	// If ctx ends before a slow Open returns, the session it may still
	// produce is closed as soon as it exists.
	sess, err := guarded(&c.running, ctx, st.server.Open, func(s tools.Session) { c.closeLate(ctx, st, s) })
	outcome := outcomeOf(err)
	c.observe(OpOpen, st.label, outcome)
	if err != nil {
		e := &SessionError{Op: OpOpen, Server: st.label, Outcome: outcome, Err: err}
		c.logFailure(ctx, e)
		if outcome != Canceled {
			st.tried, st.openErr = true, e
		}
		return nil, e
	}

	c.mu.Lock()
	if c.closed {
		// Close has already taken its list of sessions: it will never see
		// this one, so it is closed here rather than leaked.
		c.mu.Unlock()
		c.closeLate(ctx, st, sess)
		return nil, &SessionError{Op: OpOpen, Server: st.label, Outcome: Failed, Err: tools.ErrClosed}
	}
	// st.session is set before the lock is released so that Close, which
	// reads opened under the same lock, always finds it.
	st.tried, st.session = true, sess
	c.opened = append(c.opened, st)
	c.mu.Unlock()
	return sess, nil
}

// markCalled records that name is about to be called on st's session,
// which makes the session due a cleanup. It reports false once Close has
// begun: Close's list of sessions to clean up is already taken.
func (c *Context) markCalled(st *serverState, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if !contains(st.called, name) {
		st.called = append(st.called, name)
	}
	if !contains(c.called, name) {
		c.called = append(c.called, name)
	}
	return true
}

// closeLate closes a session that opened after its owner stopped waiting.
// It was never called, so it gets no cleanup. It runs on a fresh, bounded
// context that keeps only the trace of ctx, which may be over.
func (c *Context) closeLate(ctx context.Context, st *serverState, s tools.Session) {
	ctx, cancel := context.WithTimeout(telemetry.Detach(ctx), c.opts.CloseTimeout)
	defer cancel()
	c.closeSession(ctx, st, s)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
