package engine

import (
	"sync"

	"github.com/loomgate/loom/responses"
)

// Inbox takes input a client adds to a response while it runs (WebSocket
// mode's response.inject). The run takes what is waiting before each model
// turn: the items join the conversation the model reads in that turn, and
// the response's input after the request's own. A model that answers
// while items wait gets one more turn to read them.
//
// Every injection added is either taken (its Taken is called, on the
// run's goroutine, before the turn that reads it) or dropped by Close
// (its Dropped is called): the caller closes the inbox once the run has
// returned, and an injection that came too late to be read is dropped
// then.
type Inbox struct {
	mu      sync.Mutex
	pending []Injection
	closed  bool
}

// Injection is one batch of items a client adds to a running response.
type Injection struct {
	Items []responses.Item
	// Taken is called when the items join the conversation; Dropped when
	// the response ended without reading them. Either may be nil.
	Taken   func()
	Dropped func()
}

// Add queues in for the run's next model turn. It returns false, and
// keeps nothing, once the inbox is closed.
func (b *Inbox) Add(in Injection) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.pending = append(b.pending, in)
	return true
}

// Close refuses further injections and drops the ones still waiting,
// calling their Dropped in the order they came.
func (b *Inbox) Close() {
	b.mu.Lock()
	dropped := b.pending
	b.pending, b.closed = nil, true
	b.mu.Unlock()
	for _, in := range dropped {
		if in.Dropped != nil {
			in.Dropped()
		}
	}
}

// waiting reports whether injections wait to be taken. A nil inbox has
// none.
func (b *Inbox) waiting() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) > 0
}

// take returns the injections waiting, oldest first, and empties the
// inbox. A nil inbox has none.
func (b *Inbox) take() []Injection {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	taken := b.pending
	b.pending = nil
	return taken
}

// takeInjected adds the items injected since the last turn to the
// conversation and to the response's input, and tells their senders.
func (r *run) takeInjected() {
	for _, in := range r.inbox.take() {
		items := in.Items
		// Ids as input items get them: the stored input lists them.
		r.e.setItemIDs(items, true)
		r.cc.Append(items...)
		r.input = append(r.input, items...)
		if in.Taken != nil {
			in.Taken()
		}
	}
}
