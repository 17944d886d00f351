package engine

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// The spans of a response follow OpenTelemetry's GenAI semantic
// conventions (semconv v1.41.0, the newest the otel module ships with the
// gen_ai and mcp attributes): an invoke_agent span per response, a
// "chat {model}" span per model turn, "execute_tool {name}" per tool call
// (context/call.go, and clientCallSpans for the calls the client runs).
// What the conventions do not name is under loom.*.

// Attributes loom records that no semantic convention names.
const (
	attrTenant         = attribute.Key("loom.tenant")
	attrResponseStatus = attribute.Key("loom.response.status")
	attrStream         = attribute.Key("loom.stream")
	attrBackground     = attribute.Key("loom.background")
	attrToolServer     = attribute.Key("loom.tool.server")
	attrRound          = attribute.Key("loom.mrtr.round")
	attrInputRequests  = attribute.Key("loom.mrtr.requests")
	// attrInputMethods are the methods an MRTR round asked for, by their
	// mcp.method.name values.
	attrInputMethods = attribute.Key("loom.mrtr.methods")
	attrApprovalID   = attribute.Key("loom.approval.request_id")
	attrApproved     = attribute.Key("loom.approval.approved")
	// attrTurnPurpose says why a chat span that is not one of the
	// response's own turns ran: "sampling" (a server's
	// sampling/createMessage), "elicitation" (the model filling in an
	// elicitation) or "compaction" (/v1/responses/compact).
	attrTurnPurpose = attribute.Key("loom.turn.purpose")
)

// The purposes of chat spans that are not a response's own turns.
const (
	purposeSampling    = "sampling"
	purposeElicitation = "elicitation"
	purposeCompaction  = "compaction"
)

// Span event names (no convention names these).
const (
	eventInputRound       = "loom.mrtr.round"
	eventApprovalAsked    = "loom.approval.requested"
	eventApprovalAnswered = "loom.approval.answered"
)

// providerName is gen_ai.provider.name: loom speaks OpenAI's protocol to
// its engines, and the conventions name the provider by the protocol an
// instrumentation knows (an OpenAI client talking to another product
// reports "openai").
var providerName = semconv.GenAIProviderNameOpenAI

// Operation is one GenAI operation the engine ran, for the
// gen_ai.client.* metrics (Options.Metrics).
type Operation struct {
	// Name is the gen_ai.operation.name: "chat" for a model turn,
	// "invoke_agent" for a whole response.
	Name string
	// Provider is the gen_ai.provider.name.
	Provider string
	// Model is the model the request asked for, or "_OTHER" when it is
	// neither configured nor served (metricModel): a label value.
	Model string
	// Engine is the engine that served a model turn (host:port; "" when
	// none did, and for a response).
	Engine string
	// ErrorType is the error.type of a failed operation, "" else.
	ErrorType string
	// Duration is how long the operation took.
	Duration time.Duration
	// InputTokens and OutputTokens are a model turn's usage (zero for a
	// response, whose turns report theirs).
	InputTokens, OutputTokens int
}

// MetricsObserver is told of every model turn and response, for the
// gen_ai.client.token.usage and gen_ai.client.operation.duration metrics.
type MetricsObserver interface {
	ObserveOperation(op Operation)
}

// startAgentSpan starts the invoke_agent span of a response, when tracing,
// with attrs. The response's id, conversation and tenant are known once it is
// prepared (tagAgentSpan).
func (e *Engine) startAgentSpan(ctx context.Context, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !e.tracing {
		return ctx, noSpan
	}
	attrs = append(attrs, semconv.GenAIOperationNameInvokeAgent, providerName)
	return e.tracer.Start(ctx, semconv.GenAIOperationNameInvokeAgent.Value.AsString(),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// tagAgentSpan records who a prepared response is for in its invoke_agent
// span: gen_ai.conversation.id is the conversation it runs on, or else its
// session key (session.go), which every response of a chain of
// previous_response_id shares, and which says nothing of the tenant or the
// ids it is derived from.
func (r *run) tagAgentSpan(ctx context.Context) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	conv := r.conversationID
	if conv == "" {
		conv = r.sessionKey
	}
	// session.id, the same: the key Langfuse and Phoenix group a
	// session's traces by.
	span.SetAttributes(semconv.GenAIResponseID(r.resp.ID), semconv.GenAIConversationID(conv), semconv.SessionID(conv), attrTenant.String(r.tenant))
}

// endAgentSpan records how a response ended in its span and ends it.
func endAgentSpan(span trace.Span, resp *responses.Response, err error) {
	if span.IsRecording() {
		if resp != nil {
			span.SetAttributes(semconv.GenAIResponseID(resp.ID), attrResponseStatus.String(resp.Status))
			if u := resp.Usage; u != nil {
				span.SetAttributes(semconv.GenAIUsageInputTokens(u.InputTokens), semconv.GenAIUsageOutputTokens(u.OutputTokens),
					semconv.GenAIUsageCacheReadInputTokens(u.InputTokensDetails.CachedTokens))
			}
		}
		if et := responseErrorType(resp, err); et != "" {
			span.SetAttributes(semconv.ErrorTypeKey.String(et))
			span.SetStatus(codes.Error, "response "+et)
		}
	}
	span.End()
}

// observeResponse reports a response to the metrics, when configured.
func (e *Engine) observeResponse(modelName string, started time.Time, resp *responses.Response, err error) {
	if e.opts.Metrics == nil || (resp == nil && err == nil) || (err == nil && resp.Status == responses.ResponseQueued) {
		// A queued response is observed when it runs (RunBackground).
		return
	}
	served := resp != nil && resp.Usage != nil && resp.Usage.InputTokens+resp.Usage.OutputTokens > 0
	e.opts.Metrics.ObserveOperation(Operation{Name: semconv.GenAIOperationNameInvokeAgent.Value.AsString(), Provider: providerName.Value.AsString(),
		Model: e.metricModel(modelName, served), ErrorType: responseErrorType(resp, err), Duration: time.Since(started)})
}

// metricModel is the model an operation is counted under in the metrics,
// whose label values must stay few whatever clients send: a model
// Options.Models lists, or, when it lists none, a model an engine served
// (served: a model request that succeeded, a response that used tokens);
// any other is "_OTHER".
func (e *Engine) metricModel(name string, served bool) string {
	if len(e.opts.Models) > 0 && slices.Contains(e.opts.Models, name) || len(e.opts.Models) == 0 && served {
		return name
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// responseErrorType is the error.type of a response that failed ("" for
// one that did not): its error's code, or what errorType makes of err.
func responseErrorType(resp *responses.Response, err error) string {
	if err != nil {
		return errorType(err)
	}
	if resp != nil && resp.Status == responses.ResponseFailed {
		if resp.Error != nil && resp.Error.Code != "" {
			return resp.Error.Code
		}
		return semconv.ErrorTypeOther.Value.AsString()
	}
	return ""
}

// errorType is the error.type of err: low-cardinality, never its message.
// An API error gives its code (or its type), a timeout "timeout", a
// cancellation "canceled" (as the tool calls' outcome says it); anything
// else the Go type the conventions' helper names.
func errorType(err error) string {
	var ae *responses.APIError
	switch {
	case errors.As(err, &ae) && ae.Code != "":
		return ae.Code
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &ae) && ae.Type != "":
		return ae.Type
	}
	return semconv.ErrorType(err).Value.AsString()
}

// chatSpan is the span of one model request (a turn of the response, or a
// sampling or elicitation answered by the model) and what its metrics
// need.
type chatSpan struct {
	span    trace.Span
	started time.Time
	// engine is the engine that served it (model.Route.Served).
	engine string
	// compaction is set for the request of /v1/responses/compact, which
	// makes no response: its span has no gen_ai.response.id.
	compaction bool
}

// startChat starts the span of a model request, when tracing, with the
// request's parameters. purpose is "" for a turn of the response.
func (r *run) startChat(ctx context.Context, mreq *model.Request, purpose string) (context.Context, *chatSpan) {
	if !r.e.tracing && r.e.opts.Metrics == nil {
		return ctx, noChat
	}
	cs := &chatSpan{span: noSpan, started: time.Now(), compaction: purpose == purposeCompaction}
	served := mreq.Route.Served
	mreq.Route.Served = func(engine string) {
		cs.engine = engine
		if served != nil {
			served(engine)
		}
	}
	if !r.e.tracing {
		return ctx, cs
	}
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs, semconv.GenAIOperationNameChat, providerName, semconv.GenAIRequestModel(mreq.Model),
		semconv.GenAIConversationID(r.conversationKey()), semconv.GenAIRequestStream(!mreq.Whole))
	if s := mreq.Sampling; s.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*s.Temperature))
	}
	if s := mreq.Sampling; s.TopP != nil {
		attrs = append(attrs, semconv.GenAIRequestTopP(*s.TopP))
	}
	if s := mreq.Sampling; s.PresencePenalty != nil {
		attrs = append(attrs, semconv.GenAIRequestPresencePenalty(*s.PresencePenalty))
	}
	if s := mreq.Sampling; s.FrequencyPenalty != nil {
		attrs = append(attrs, semconv.GenAIRequestFrequencyPenalty(*s.FrequencyPenalty))
	}
	if mreq.MaxOutputTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(mreq.MaxOutputTokens))
	}
	if mreq.TextFormat != nil {
		// Only set for a JSON format (json_object, json_schema).
		attrs = append(attrs, semconv.GenAIOutputTypeJSON)
	}
	if purpose != "" {
		attrs = append(attrs, attrTurnPurpose.String(purpose))
	}
	if r.e.opts.CaptureContent {
		attrs = append(attrs, inputContent(mreq)...)
	}
	ctx, cs.span = r.e.tracer.Start(ctx, semconv.GenAIOperationNameChat.Value.AsString()+" "+mreq.Model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, cs
}

// noChat stands for the chat span of a model request when neither spans
// nor metrics are recorded: nothing is measured.
var noChat = &chatSpan{span: noSpan}

// conversationKey is the response's gen_ai.conversation.id (tagAgentSpan).
func (r *run) conversationKey() string {
	if r.conversationID != "" {
		return r.conversationID
	}
	return r.sessionKey
}

// endChat records how a model request ended in its span, ends it, and
// reports it to the metrics. output is what the model wrote, for
// --otel-capture-content (nil: nothing to record).
func (r *run) endChat(cs *chatSpan, modelName string, usage responses.Usage, finish string, output []responses.Item, err error) {
	if cs == noChat {
		return
	}
	et := ""
	if err != nil {
		et = errorType(err)
	}
	if m := r.e.opts.Metrics; m != nil {
		m.ObserveOperation(Operation{Name: semconv.GenAIOperationNameChat.Value.AsString(), Provider: providerName.Value.AsString(),
			Model: r.e.metricModel(modelName, err == nil), Engine: cs.engine, ErrorType: et,
			Duration: time.Since(cs.started), InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens})
	}
	span := cs.span
	if span.IsRecording() {
		if !cs.compaction {
			span.SetAttributes(semconv.GenAIResponseID(r.resp.ID))
		}
		span.SetAttributes(
			semconv.GenAIUsageInputTokens(usage.InputTokens),
			semconv.GenAIUsageOutputTokens(usage.OutputTokens),
			semconv.GenAIUsageCacheReadInputTokens(usage.InputTokensDetails.CachedTokens),
			semconv.GenAIUsageReasoningOutputTokens(usage.OutputTokensDetails.ReasoningTokens))
		span.SetAttributes(engineAttributes(cs.engine)...)
		if finish != "" {
			span.SetAttributes(semconv.GenAIResponseFinishReasons(finish))
		}
		if r.e.opts.CaptureContent && output != nil {
			span.SetAttributes(outputContent(output, finish))
		}
		if et != "" {
			span.SetAttributes(semconv.ErrorTypeKey.String(et))
			span.SetStatus(codes.Error, "model request failed: "+et)
		}
	}
	span.End()
}

// engineAttributes are server.address and server.port of an engine
// (host:port, as the backends name it; no credentials).
func engineAttributes(engine string) []attribute.KeyValue {
	if engine == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(engine)
	if err != nil {
		return []attribute.KeyValue{semconv.ServerAddress(engine)}
	}
	attrs := []attribute.KeyValue{semconv.ServerAddress(host)}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	return attrs
}

// clientCallSpans records the calls of a turn that the client runs
// (function calls, and the kinds the client executes): an execute_tool
// span each, of gen_ai.tool.type "function", the conventions' type for a
// tool the client executes. The span marks the hand-over to the client,
// which runs the call after the response ends: its duration is not the
// call's.
func (r *run) clientCallSpans(ctx context.Context, calls []*turnCall) {
	if !r.e.tracing {
		return
	}
	for _, c := range calls {
		if c.server != "" || c.unconfigured || c.notOffered || c.approval {
			continue
		}
		attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(c.name),
			semconv.GenAIToolCallID(c.callID), semconv.GenAIToolType("function")}
		if r.e.opts.CaptureContent && c.item.Call != nil {
			attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(c.item.Call.Arguments))
		}
		_, span := r.e.tracer.Start(ctx, semconv.GenAIOperationNameExecuteTool.Value.AsString()+" "+c.name,
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
		span.End()
	}
}

// approvalAsked adds the event of an approval request to the response's
// span. tool is the name the tool is offered under (its execute_tool
// span's gen_ai.tool.name).
func approvalAsked(ctx context.Context, server, tool, requestID string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(eventApprovalAsked, trace.WithAttributes(attrToolServer.String(server), semconv.GenAIToolName(tool), attrApprovalID.String(requestID)))
	}
}

// approvalAnswered adds the event of the client's answer to an approval
// request to the response's span; offered is the name the tool is offered
// under ("" when the request no longer offers it).
func approvalAnswered(ctx context.Context, a *approval, offered string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(eventApprovalAnswered, trace.WithAttributes(attrToolServer.String(a.request.ToolFields().ServerLabel),
			semconv.GenAIToolName(offered), attrApprovalID.String(a.request.ID), attrApproved.Bool(a.approve)))
	}
}

// inputRound adds the event of one MRTR round to the response's span: the
// call that asked for input, the round, and the methods it asked for
// (mcp.method.name values: sampling/createMessage, elicitation/create,
// roots/list).
func inputRound(ctx context.Context, st *callState, ir *tools.InputRequired) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		methods := inputMethods(ir)
		span.AddEvent(eventInputRound, trace.WithAttributes(attrToolServer.String(st.server), semconv.GenAIToolName(st.call.Name),
			semconv.GenAIToolCallID(st.call.CallID), attrRound.Int(st.round+1), attrInputRequests.Int(len(methods)),
			attrInputMethods.StringSlice(methods)))
	}
}
