package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/telemetry"
	"github.com/loomgate/loom/tenant"
)

// EventNotifier tells this replica's followers of a running response that
// events of it were appended, on whichever replica runs it (PostgreSQL
// LISTEN/NOTIFY: postgres.Notifier). Without one, followers poll.
type EventNotifier interface {
	// Subscribe returns a channel that receives after events of
	// response id were appended (coalesced), and the function that ends
	// the subscription.
	Subscribe(id string) (<-chan struct{}, func())
	// Notify wakes the subscribers of response id on every replica: the
	// engine calls it once the response is stored with its last events.
	Notify(ctx context.Context, id string) error
}

// Queue hands background responses to a job engine on the shared store.
// Whichever replica claims a job calls Engine.RunBackground with it. The
// background package implements it with River.
type Queue interface {
	// Enqueue stores job durably: once it returns, some replica will run
	// it, even if this one stops.
	Enqueue(ctx context.Context, job store.BackgroundJob) error
	// Claimed returns the response ids of the jobs that some replica's
	// job engine claimed before before and has not finished. The sweep
	// (SweepLeases) fails those whose response is still queued without
	// a lease: the replica that claimed the job died before its first
	// write (Store.ClaimQueued).
	Claimed(ctx context.Context, before time.Time) ([]string, error)
}

// errResponseNotYetStored asks the job engine to deliver a job again,
// once: its response was not stored when it came.
var errResponseNotYetStored = errors.New("the background response is not stored yet")

// errCancelled is the cause of a background run's context when a cancel
// was asked for.
var errCancelled = errors.New("the response was cancelled")

// enqueue hands a prepared background response to the job engine, then
// stores it as queued. In that order, a failure of either leaves nothing
// queued for good: a job whose response was never stored finds none and
// ends (RunBackground), where a response stored without its job would
// wait forever. The client gets a 503 for either.
func (e *Engine) enqueue(ctx context.Context, r *run) (*responses.Response, error) {
	r.resp.Status = responses.ResponseQueued
	rec, err := r.storeRecord(ctx)
	if err != nil {
		return nil, err
	}
	request, err := json.Marshal(r.req)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.saveTimeout(rec))
	defer cancel()
	// The conversation is held from now: a second response on it is
	// refused at once, not when this one starts running.
	if err := e.claimConversation(ctx, r); err != nil {
		return nil, err
	}
	if err := e.opts.Queue.Enqueue(sctx, store.BackgroundJob{ResponseID: rec.ID, Request: request}); err != nil {
		e.finishTurn(ctx, r, false)
		return nil, storeUnavailable(fmt.Errorf("enqueue background response %s: %w", rec.ID, err))
	}
	if err := e.store.SaveResponse(sctx, rec); err != nil {
		e.finishTurn(ctx, r, false)
		return nil, storeUnavailable(fmt.Errorf("store queued response %s: %w", rec.ID, err))
	}
	e.log.InfoContext(ctx, "response queued", "id", rec.ID, "model", r.req.Model)
	return r.resp, nil
}

// RunBackground runs a queued background response: the job engine calls it
// on the replica that claimed job. Its first write leases the response to
// this engine (Store.ClaimQueued), renewed by the heartbeat until the run
// ends, so that a replica dying at any point after the job's claim leaves
// a response the sweep fails (SweepLeases). A response that is no longer
// queued (cancelled before it started, deleted, failed by a sweep, run by
// an earlier delivery of the job) or that another delivery leased is left
// alone, so a job delivered twice runs once. An error before the lease is
// written means the run never started: the job engine may try the job
// again. Later errors are for its log; the response itself is stored with
// its outcome.
func (e *Engine) RunBackground(ctx context.Context, job store.BackgroundJob) error {
	e.inflight.add(job.ResponseID)
	defer e.inflight.remove(job.ResponseID)
	// Written even when a shutdown already cancelled ctx: a claimed job
	// is leased, so its response is run or swept, never left queued.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.StoreTimeout)
	claimed, err := e.store.ClaimQueued(sctx, job.ResponseID, e.owner, e.opts.Now().Add(e.opts.Lease))
	cancel()
	if errors.Is(err, store.ErrNotFound) && job.Attempt <= 1 {
		// The job is stored before its response (enqueue): a first
		// delivery may come before the response's write commits. The
		// next delivery tells a response that will not come (its write
		// failed, or it was deleted) by finding none again.
		return errResponseNotYetStored
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && !claimed) {
		return nil
	}
	if err != nil {
		return err
	}
	rec, err := e.store.GetResponse(ctx, job.ResponseID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Status != responses.ResponseQueued {
		return nil
	}
	// The run is the tenant's that queued it, and stays in the trace of
	// the request that queued it: its log lines and spans carry that id.
	ctx = telemetry.ContinueTrace(tenant.With(ctx, rec.Tenant), rec.TraceID)
	started := time.Now()
	ctx, span := e.startAgentSpan(ctx, semconv.GenAIResponseID(rec.ID), attrBackground.Bool(true))
	var resp *responses.Response
	var modelName string
	defer func() {
		endAgentSpan(span, resp, nil)
		e.observeResponse(modelName, started, resp, nil)
	}()
	req, err := responses.DecodeRequest(job.Request)
	if req != nil {
		modelName = req.Model
		span.SetAttributes(semconv.GenAIRequestModel(req.Model))
	}
	if err != nil {
		var apiErr *responses.APIError
		if !errors.As(err, &apiErr) {
			return err
		}
		return e.failQueued(ctx, rec, apiErr)
	}
	r, err := e.prepare(ctx, req, nil, rec)
	if err != nil {
		// What was checked when the response was queued no longer holds
		// (the previous response was deleted meanwhile, say).
		var ae *responses.APIError
		if !errors.As(err, &ae) {
			ae = &responses.APIError{Kind: responses.EInternal, Type: responses.ErrServer, Message: "the server could not start the response"}
		}
		return e.failQueued(ctx, rec, ae)
	}
	resp, err = e.execute(ctx, r, nil)
	if errors.Is(err, context.Canceled) {
		return nil // cancelled: the response says so
	}
	var ae *responses.APIError
	if errors.As(err, &ae) && !r.leased {
		// The run could not start (the store refused the write).
		return err
	}
	return nil
}

// failQueued stores a queued response as failed with apiErr, when its run
// cannot start.
func (e *Engine) failQueued(ctx context.Context, rec *store.Record, apiErr *responses.APIError) error {
	var resp responses.Response
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		return err
	}
	p := apiErr.Payload()
	code := p.Type
	if p.Code != nil {
		code = *p.Code
	}
	resp.Status = responses.ResponseFailed
	resp.Error = &responses.ResponseError{Code: code, Message: p.Message}
	body, err := json.Marshal(&resp)
	if err != nil {
		return err
	}
	failed := *rec
	failed.Status, failed.Response = resp.Status, body
	failed.LeaseOwner, failed.LeaseUntil = "", time.Time{}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.StoreTimeout)
	defer cancel()
	err = e.store.SaveResponse(sctx, &failed)
	e.releaseConversation(sctx, rec.ID, rec.Response)
	return err
}

// watchCancel returns a context that is cancelled, with errCancelled as
// its cause, once the response's cancel flag is set; stop ends the watch.
// The flag is read at once (a cancel may have come while the response was
// queued) and then every CancelPoll.
func (e *Engine) watchCancel(ctx context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(e.opts.CancelPoll)
		defer t.Stop()
		for {
			flag, err := e.store.CancelRequested(ctx, id)
			if err == nil && flag {
				e.log.InfoContext(ctx, "response cancel requested", "id", id)
				cancel(errCancelled)
				return
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ctx, func() {
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// eventAppender writes a background response's events to the store as they
// are built, off the path that builds them: add never waits for the store.
// Events that arrive while a write is under way, or within appendInterval
// of the last, go in the next one. A failed write is retried with the
// next, so stored events never have a gap.
type eventAppender struct {
	e    *Engine
	id   string
	mu   sync.Mutex
	buf  []json.RawMessage
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// logCtx carries the response's trace, for the appends that run on
	// contexts of their own.
	logCtx context.Context
}

func newEventAppender(ctx context.Context, e *Engine, id string) *eventAppender {
	a := &eventAppender{e: e, id: id, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), logCtx: telemetry.Detach(ctx)}
	go a.run()
	return a
}

// add queues ev for the next write.
func (a *eventAppender) add(ev json.RawMessage) {
	a.mu.Lock()
	a.buf = append(a.buf, ev)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// appendInterval is how long the appender gathers events before it writes
// them: a fast stream costs a write per interval, not one per event, and a
// resumed stream lags the live one by about this much at most.
const appendInterval = 20 * time.Millisecond

func (a *eventAppender) run() {
	defer close(a.done)
	gather := time.NewTimer(appendInterval)
	defer gather.Stop()
	for {
		select {
		case <-a.wake:
		case <-a.stop:
			return
		}
		gather.Reset(appendInterval)
		select {
		case <-gather.C:
		case <-a.stop:
			return
		}
		a.flush()
	}
}

func (a *eventAppender) flush() {
	a.mu.Lock()
	batch := a.buf
	a.buf = nil
	a.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(a.logCtx, a.e.opts.StoreTimeout)
	defer cancel()
	if err := a.e.store.AppendEvents(ctx, a.id, batch); err != nil {
		a.e.log.WarnContext(ctx, "append events", "id", a.id, "events", len(batch), "err", err)
		a.mu.Lock()
		a.buf = append(batch, a.buf...)
		a.mu.Unlock()
	}
}

// close stops the appender once its current write is done. The events not
// yet written are left to the final save, which writes them all.
func (a *eventAppender) close() {
	close(a.stop)
	<-a.done
}
