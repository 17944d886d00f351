package engine

import (
	"slices"

	"github.com/loomgate/loom/responses"
)

// Continuation is the conversation of one finished response, held in
// memory by a caller that runs several responses in a row on one
// connection (WebSocket mode), so that a response stored nowhere (store
// false) can still be continued with previous_response_id on that
// connection.
type Continuation struct {
	// ResponseID is the response the conversation ends with.
	ResponseID string
	// Status is that response's final status.
	Status string
	// Items are the conversation, oldest first: what the response
	// continued, its input and its output, as the store would return
	// them.
	Items []responses.Item
	// SessionKey routes the response's model turns; its continuation
	// inherits it, as it would from the store.
	SessionKey string
}

// RunOptions are per-call options of RunWith.
type RunOptions struct {
	// Previous, when its ResponseID is the request's previous_response_id,
	// is the conversation continued, instead of the stored chain.
	Previous *Continuation
	// Keep, when set, receives the response's conversation once it has
	// ended (whatever its status), before its terminal event goes to the
	// sink, so that a client that has the event can continue it at once;
	// a request rejected before it started calls nothing.
	Keep func(*Continuation)
	// Flush, when set, tells the caller that the events given to the sink
	// so far are all there is for now: the upstream has nothing more
	// buffered, or a model turn ended. A sink that buffers events (an SSE
	// writer coalescing its writes) sends them then; it must still send
	// them on its own within a short time, since the engine does not call
	// Flush before every wait (a tool call, the store).
	Flush func()
	// GiveInput gives the run the request's input items: it gives them
	// their ids in place (not the messages of a run whose input nobody
	// can see again: store false, no conversation, background or Keep)
	// and builds the model's conversation on them, where it would
	// otherwise copy them first so that the caller's request stays as it
	// was (a long input is then held once, not twice). The caller must
	// not use req.Input.Items once Run is called.
	// The server sets it: the request is its own decoded value.
	GiveInput bool
	// NoGenerate prepares the response without calling the model
	// (WebSocket mode's generate false, a client's warm-up): it is
	// checked, started and completed with no output, and stored or kept
	// like any other, so that a later request continues it with
	// previous_response_id.
	NoGenerate bool
	// SessionID is the client's session header (Codex sends session_id),
	// one source of the response's session key when the request has no
	// conversation, previous response or prompt_cache_key (session.go).
	SessionID string
	// Inbox, when set, takes input the client injects while the response
	// runs (WebSocket mode's response.inject); the caller closes it once
	// RunWith has returned.
	Inbox *Inbox
}

func (o *RunOptions) inbox() *Inbox {
	if o == nil {
		return nil
	}
	return o.Inbox
}

func (o *RunOptions) sessionID() string {
	if o == nil {
		return ""
	}
	return o.SessionID
}

func (o *RunOptions) noGenerate() bool {
	return o != nil && o.NoGenerate
}

func (o *RunOptions) givesInput() bool {
	return o != nil && o.GiveInput
}

func (o *RunOptions) flush() func() {
	if o == nil || o.Flush == nil {
		return func() {}
	}
	return o.Flush
}

func (o *RunOptions) previous(id string) *Continuation {
	if o == nil || o.Previous == nil || o.Previous.ResponseID != id {
		return nil
	}
	return o.Previous
}

func (o *RunOptions) keep(r *run, history []responses.Item) {
	if o == nil || o.Keep == nil {
		return
	}
	items := make([]responses.Item, 0, len(history)+len(r.input)+len(r.resp.Output))
	items = append(items, history...)
	items = append(items, r.input...)
	items = append(items, r.resp.Output...)
	o.Keep(&Continuation{ResponseID: r.resp.ID, Status: r.resp.Status, Items: slices.Clip(items), SessionKey: r.sessionKey})
}
