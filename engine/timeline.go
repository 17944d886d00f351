package engine

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"
)

// Timeline is when each step of a response's run happened: its model
// turns, its server tool calls, their input rounds (MRTR), the calls the
// client approved, and the cleanup pass. The engine stores it with the
// response (store.Record.Timeline) so that the operator's console can
// draw the run to scale from any replica: the stored events carry no
// time. Offsets are from Start, in microseconds (a scripted tool call
// takes less than a millisecond).
type Timeline struct {
	// Start is when the run started, in Unix milliseconds.
	Start int64 `json:"start_unix_ms"`
	// EndUS is when the run ended (its final save), from Start.
	EndUS int64          `json:"end_us"`
	Steps []TimelineStep `json:"steps"`
	// Dropped counts the steps past maxTimelineSteps, not recorded.
	Dropped int `json:"dropped,omitempty"`
}

// The timeline's bounds: it is stored with every response that ran a
// tool, so a run of many calls, or a tool that fails with a large result,
// must not make it large.
const (
	maxTimelineSteps = 1000
	maxStepError     = 512 // bytes of a step's Error
)

// The kinds of timeline step.
const (
	StepTurn       = "turn"        // one model turn
	StepToolCall   = "tool_call"   // one server tool call, all its rounds
	StepInputRound = "input_round" // one MRTR round of a call: answers, then the retried call
	StepApproval   = "approval"    // a call the client approved (or denied), run before the first turn
	StepCleanup    = "cleanup"     // the cleanup pass and close of the tools' sessions
)

// TimelineStep is one step of a Timeline.
type TimelineStep struct {
	Kind string `json:"kind"`
	// Name is the model of a turn, the tool of a call, round or approval.
	Name string `json:"name,omitempty"`
	// Server is the tool server of a call, round or approval; Engine the
	// engine (host:port) that served a turn.
	Server string `json:"server,omitempty"`
	Engine string `json:"engine,omitempty"`
	// CallID and ItemID name the call's item in the response's output;
	// ItemIDs are the output items a turn wrote.
	CallID  string   `json:"call_id,omitempty"`
	ItemID  string   `json:"item_id,omitempty"`
	ItemIDs []string `json:"item_ids,omitempty"`
	// Round is an input round's number, from 1.
	Round   int   `json:"round,omitempty"`
	StartUS int64 `json:"start_us"`
	EndUS   int64 `json:"end_us"`
	// A turn's tokens: its input, of which cached, and its output.
	InputTokens  int `json:"input_tokens,omitempty"`
	CachedTokens int `json:"cached_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
	// Error says why the step failed ("" if it did not).
	Error string `json:"error,omitempty"`
}

// DecodeTimeline reads a stored timeline; nil or empty is no timeline.
func DecodeTimeline(raw json.RawMessage) (*Timeline, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var tl Timeline
	if err := json.Unmarshal(raw, &tl); err != nil {
		return nil, err
	}
	return &tl, nil
}

// timeline collects a run's steps as they end. The run's own goroutine
// adds most of them; the mutex is for the rest (none today, but a step
// added from a call's goroutine must not race).
type timeline struct {
	mu         sync.Mutex
	start, end time.Time
	steps      []TimelineStep
	dropped    int
}

// add records step s, which ran from start to end: its error cut to
// maxStepError bytes, and nothing past maxTimelineSteps but a count.
func (t *timeline) add(s TimelineStep, start, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.steps) >= maxTimelineSteps {
		t.dropped++
		return
	}
	s.StartUS, s.EndUS = start.Sub(t.start).Microseconds(), end.Sub(t.start).Microseconds()
	if len(s.Error) > maxStepError {
		cut := maxStepError
		for cut > 0 && !utf8.RuneStart(s.Error[cut]) {
			cut--
		}
		s.Error = s.Error[:cut] + "…"
	}
	t.steps = append(t.steps, s)
}

// has reports whether a step of kind was recorded.
func (t *timeline) has(kind string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.steps {
		if s.Kind == kind {
			return true
		}
	}
	return false
}

// encode is the timeline as stored, the run ended at end unless an
// earlier encode said so already; nil when nothing was recorded.
func (t *timeline) encode(end time.Time) json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.steps) == 0 {
		return nil
	}
	if t.end.IsZero() {
		t.end = end
	}
	b, err := json.Marshal(Timeline{Start: t.start.UnixMilli(), EndUS: t.end.Sub(t.start).Microseconds(), Steps: t.steps, Dropped: t.dropped})
	if err != nil {
		return nil
	}
	return b
}

// errorText is err's message, "" for none.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// closeTools ends the run's tool work (the cleanup pass, then the close of
// the sessions: conversation.Context.Close) on every path out of execute.
// The pass runs after the final save, so that it does not hold back the
// response's end; when the run called a server tool and was stored, its
// timeline is written once more with the pass on it.
func (r *run) closeTools(ctx context.Context) {
	start := time.Now()
	err := r.cc.Close(ctx)
	if !r.saved || (!r.timeline.has(StepToolCall) && !r.timeline.has(StepApproval)) {
		return
	}
	r.timeline.add(TimelineStep{Kind: StepCleanup, Error: errorText(err)}, start, time.Now())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.e.opts.StoreTimeout)
	defer cancel()
	if err := r.e.store.SetTimeline(sctx, r.resp.ID, r.timeline.encode(time.Now())); err != nil {
		r.e.log.WarnContext(ctx, "store the timeline after the cleanup pass", "id", r.resp.ID, "err", err)
	}
}
