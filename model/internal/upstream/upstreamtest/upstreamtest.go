// Package upstreamtest holds what the backends' tests share: helpers to
// run a turn against a loopback upstream, and Run, the table of HTTP,
// retry, timeout and error-mapping cases every backend must pass, fed
// with that backend's own wire format (a Wire).
package upstreamtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// Options are the knobs the shared tests turn on a backend's Options.
// Zero fields keep the backend's test defaults.
type Options struct {
	Retries          int
	FirstByteTimeout time.Duration
	SessionHeader    string
	CacheSalt        string
	ProbeInterval    time.Duration
	Observer         model.EngineObserver
}

// Apply sets the fields o changes in a backend's HTTPOptions.
func (o Options) Apply(h *model.HTTPOptions) {
	if o.Retries != 0 {
		h.Retries = o.Retries
	}
	if o.FirstByteTimeout != 0 {
		h.FirstByteTimeout = o.FirstByteTimeout
	}
	if o.SessionHeader != "" {
		h.SessionHeader = o.SessionHeader
	}
	if o.CacheSalt != "" {
		h.CacheSalt = o.CacheSalt
	}
	if o.ProbeInterval != 0 {
		h.ProbeInterval = o.ProbeInterval
	}
	if o.Observer != nil {
		h.Observer = o.Observer
	}
}

// Wire describes a backend under test and its wire format.
type Wire struct {
	// New returns the backend for baseURL (ending in /v1) with the
	// backend's test options (fast retries, two of them; a first-byte
	// timeout of a few seconds) changed by o.
	New func(baseURL, apiKey string, o Options) model.Backend
	// NewFleet is New over several engines (the backend's NewFleet),
	// closed when the test ends.
	NewFleet func(baseURLs []string, apiKey string, o Options) model.Backend
	// Path is the endpoint the backend posts to, for base URL /v1.
	Path string
	// OK is a whole, minimal turn: text, then [DONE]. OKDeltas is how
	// many deltas it emits.
	OK       string
	OKDeltas int
	// First is one SSE event that emits exactly one DeltaText and does
	// not finish the turn.
	First string
	// Unfinished is a turn that ends without [DONE], emitting
	// UnfinishedDeltas deltas first.
	Unfinished       string
	UnfinishedDeltas int
	// Finished is one event emitting one delta and finishing with reason,
	// then [DONE].
	Finished func(reason string) string
}

// Collect runs one turn and returns every delta emitted, also on error,
// except the DeltaPause hints.
func Collect(ctx context.Context, b model.Backend, req *model.Request) ([]model.Delta, error) {
	var out []model.Delta
	err := b.Stream(ctx, req, func(d model.Delta) error {
		if d.Kind != model.DeltaPause {
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// UserReq is a one-message request.
func UserReq(text string) *model.Request {
	return &model.Request{Model: "openai/gpt-oss-20b", Items: []responses.Item{UserMsg(text)}}
}

// UserMsg is a user message with one text part.
func UserMsg(text string) responses.Item {
	return responses.Item{Type: responses.ItemMessage, Role: "user", Content: []responses.ContentPart{{Type: responses.PartInputText, Text: text}}}
}

// ReasoningItem is a reasoning item with one reasoning_text part.
func ReasoningItem(text string) responses.Item {
	return responses.Item{Type: responses.ItemReasoning, Content: []responses.ContentPart{{Type: responses.PartReasoningText, Text: text}}}
}

// CallItem is a function_call item.
func CallItem(id, name, args string) responses.Item {
	return responses.Item{Type: responses.ItemFunctionCall, Call: &responses.ItemCall{CallID: id, Name: name, Arguments: args}}
}

// OutputItem is a function_call_output item with a string output.
func OutputItem(id, output string) responses.Item {
	raw, _ := json.Marshal(output)
	return responses.Item{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: id, Output: raw}}
}

// SSEServer answers every request with body as an SSE stream, written in
// one go as an engine under no load would.
func SSEServer(t testing.TB, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Recorder is an upstream that keeps the requests it got and answers
// each with Stream.
type Recorder struct {
	Stream string

	mu   sync.Mutex
	reqs []Recorded
}

// Recorded is one request a Recorder got.
type Recorded struct {
	Body []byte
	Path string
	Auth string // the Authorization header
}

func (rec *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, Recorded{Body: b, Path: r.URL.Path, Auth: r.Header.Get("Authorization")})
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, rec.Stream)
}

// Requests returns what the Recorder got so far, oldest first.
func (rec *Recorder) Requests() []Recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Recorded(nil), rec.reqs...)
}
