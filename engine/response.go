package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/telemetry"
	"github.com/loomgate/loom/tenant"
)

// newResponseObjects is a new response and the defaults it points at (a
// text format, an empty reasoning), in one allocation instead of three.
type newResponseObjects struct {
	resp      responses.Response
	format    responses.TextFormat
	reasoning responses.ReasoningParam
}

// newResponse builds the response object, echoing the request's knobs.
func (e *Engine) newResponse(req *responses.Request) *responses.Response {
	o := &newResponseObjects{format: responses.TextFormat{Type: responses.FormatText}}
	resp := &o.resp
	*resp = responses.Response{
		ID:                 e.opts.NewID("resp"),
		Object:             "response",
		CreatedAt:          e.opts.Now().Unix(),
		Status:             responses.ResponseInProgress,
		Model:              req.Model,
		PreviousResponseID: req.PreviousResponseID,
		Instructions:       req.Instructions,
		Output:             []responses.Item{},
		Tools:              req.Tools,
		Truncation:         "disabled",
		ParallelToolCalls:  req.ParallelCalls(),
		Text:               responses.TextConfig{Format: &o.format},
		TopP:               1,
		Temperature:        1,
		Reasoning:          &o.reasoning,
		MaxOutputTokens:    req.MaxOutputTokens,
		MaxToolCalls:       req.MaxToolCalls,
		Store:              req.StoreEnabled(),
		Background:         req.Background != nil && *req.Background,
		ServiceTier:        "default",
		Metadata:           req.Metadata,
		SafetyIdentifier:   req.SafetyIdentifier,
		PromptCacheKey:     req.PromptCacheKey,
		User:               req.User,
	}
	if resp.Tools == nil {
		resp.Tools = []responses.Tool{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]any{}
	}
	if req.ToolChoice != nil {
		resp.ToolChoice = *req.ToolChoice
	} else {
		resp.ToolChoice = responses.ToolChoice{Mode: responses.ToolChoiceAuto}
	}
	if req.Truncation != nil {
		resp.Truncation = *req.Truncation
	}
	if req.Text != nil {
		if req.Text.Format != nil {
			resp.Text.Format = req.Text.Format
		}
		resp.Text.Verbosity = req.Text.Verbosity
	}
	if req.TopP != nil {
		resp.TopP = *req.TopP
	}
	if req.Temperature != nil {
		resp.Temperature = *req.Temperature
	}
	if req.PresencePenalty != nil {
		resp.PresencePenalty = *req.PresencePenalty
	}
	if req.FrequencyPenalty != nil {
		resp.FrequencyPenalty = *req.FrequencyPenalty
	}
	if req.Reasoning != nil {
		resp.Reasoning = req.Reasoning
	}
	if req.ServiceTier != nil && *req.ServiceTier != "auto" {
		resp.ServiceTier = *req.ServiceTier
	}
	return resp
}

// storeRecord is the response as the store keeps it, as far as every write of
// it agrees: the object as it is now, its input, who owns it, its trace.
func (r *run) storeRecord(ctx context.Context) (*store.Record, error) {
	rec := &store.Record{ID: r.resp.ID, CreatedAt: r.resp.CreatedAt, Status: r.resp.Status, Response: r.object(), Input: r.input,
		Tenant: tenant.From(ctx), TraceID: telemetry.TraceID(ctx), SessionKey: r.sessionKey}
	if r.req.PreviousResponseID != nil {
		rec.PreviousResponseID = *r.req.PreviousResponseID
	}
	return rec, nil
}

// object is the response object as it is now, for the store: the one the
// terminal event carries once the response has ended (its encoding is
// kept, one copy of a response as large as its echoed tools fewer), else
// encoded afresh.
func (r *run) object() json.RawMessage {
	if n := len(r.events); n > 0 && r.builder != nil && r.builder.Ended() {
		if obj, ok := responses.ResponseOf(r.events[n-1]); ok {
			return obj
		}
	}
	return r.resp.AppendJSON(nil, responses.DialectOpenAI)
}

// stored reports whether save writes the response that ended with
// upstreamErr (see save).
func (r *run) stored(upstreamErr error) bool {
	return r.req.StoreEnabled() && (r.sink != nil || r.background || upstreamErr == nil)
}

// save stores the response when store is on, and returns the store's
// error when it could not: the caller then tells the client the response
// failed, never that it completed. A non-streaming response that failed
// upstream is not stored: its client gets an HTTP error and never learns
// the id. A background response always is: its client polls it.
//
// A failed save is tried once more after saveRetryPause: a store that
// lost a connection or restarted usually takes the second write.
func (e *Engine) save(ctx context.Context, r *run, upstreamErr error) error {
	if !r.stored(upstreamErr) {
		return nil
	}
	rec, err := r.storeRecord(ctx)
	if err != nil {
		return err
	}
	rec.Output, rec.Events, rec.Pending = r.resp.Output, r.events, encodePending(r.pendingOut)
	rec.Timeline = r.timeline.encode(time.Now())
	// The request's context may be cancelled (client gone): the response
	// is still saved, within a bound of its own.
	sctx, span := context.WithoutCancel(ctx), noSpan
	if e.tracing {
		sctx, span = e.tracer.Start(sctx, "store save", trace.WithAttributes(
			attribute.String("gen_ai.response.id", r.resp.ID), attribute.Int("loom.store.events", len(rec.Events))))
	}
	defer span.End()
	err = e.saveRecord(sctx, rec)
	if err != nil {
		e.log.WarnContext(ctx, "store response failed; trying once more", "id", r.resp.ID, "err", err)
		select {
		case <-time.After(saveRetryPause):
		case <-e.life.Done():
		}
		err = e.saveRecord(sctx, rec)
	}
	if err != nil {
		span.SetStatus(codes.Error, "save failed")
		return fmt.Errorf("store response %s: %w", r.resp.ID, err)
	}
	return nil
}

// saveRetryPause is how long a failed save waits before its one retry.
const saveRetryPause = 500 * time.Millisecond

// saveRecord writes rec within the store timeout, grown by what it writes
// (saveTimeout).
func (cr *core) saveRecord(ctx context.Context, rec *store.Record) error {
	ctx, cancel := context.WithTimeout(ctx, cr.saveTimeout(rec))
	defer cancel()
	return cr.store.SaveResponse(ctx, rec)
}

// saveTimeout bounds one write of rec: the store timeout, and a second
// more for every 10,000 items or 4 MiB it writes, so that a response as
// large as the request limits allow is stored on either store rather
// than timed out (250k items took PostgreSQL past a fixed 10 s).
func (cr *core) saveTimeout(rec *store.Record) time.Duration {
	n := len(rec.Input) + len(rec.Output) + len(rec.Events)
	size := len(rec.Response)
	for _, ev := range rec.Events {
		size += len(ev)
	}
	return cr.opts.StoreTimeout + time.Duration(n/10_000+size/(4<<20))*time.Second
}

// failStored turns a response whose save failed into a failed one: the
// client is told the response could not be stored (a 503 for JSON, and
// response.failed in place of the terminal event held back for a stream),
// never that it completed. It returns the error for the caller; the row,
// if the response was stored in progress, is failed by the lease sweep.
func (r *run) failStored(err error) *responses.APIError {
	apiErr := storeUnavailable(err)
	r.resp.Status = responses.ResponseFailed
	r.resp.Error = &responses.ResponseError{Code: apiErr.Code, Message: "the response could not be stored; try again"}
	if r.final != nil {
		r.final = &responses.Event{Type: responses.EventFailed, SequenceNumber: r.final.SequenceNumber, Response: r.resp}
	}
	return apiErr
}

// upstreamFailure is the API error of a failed model turn: the backend's
// own (its kind says what failed), or, for an error of no kind, an
// upstream failure whose cause stays in the log.
func upstreamFailure(err error) *responses.APIError {
	var apiErr *responses.APIError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return &responses.APIError{Kind: responses.EUpstream, Message: "the upstream model failed", Cause: err}
}

func itemPrefix(typ string) string {
	switch typ {
	case responses.ItemMessage:
		return "msg"
	case responses.ItemFunctionCall:
		return "fc"
	case responses.ItemFunctionCallOutput:
		return "fco"
	case responses.ItemReasoning:
		return "rs"
	case responses.ItemCompaction:
		return "cmp"
	}
	return "item"
}
