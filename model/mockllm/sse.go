package mockllm

import (
	"encoding/json"
	"net/http"
	"time"
)

// sseWriter writes server-sent events the way OpenAI-compatible engines
// do: "data: <json>\n\n" per event, flushed at once, "data: [DONE]" last.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// event writes one JSON event.
func (s *sseWriter) event(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		panic("mockllm: marshal: " + err.Error())
	}
	return s.raw(body)
}

// raw writes one event with data verbatim (for [DONE] and garbage).
func (s *sseWriter) raw(data []byte) error {
	s.buf = append(s.buf[:0], "data: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, "\n\n"...)
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) done() error { return s.raw([]byte("[DONE]")) }

// streamEvents writes the chunks as SSE, applying latency and the
// script's #cut and #stall, and counts how the stream ended. Every
// endpoint streams through it, so the failure directives mean the same
// everywhere.
func streamEvents[T any](s *Server, w http.ResponseWriter, r *http.Request, chunks []T, t *turn, latency time.Duration) {
	ctx := r.Context()
	sse := newSSEWriter(w)
	for i := 0; i <= len(chunks); i++ {
		if i == t.cut || (i == len(chunks) && t.cut >= 0) {
			s.abort()
		}
		if i == t.stall || (i == len(chunks) && t.stall >= 0) {
			s.waitOutcome(s.sleep(ctx, -1))
			return
		}
		if i == len(chunks) {
			break
		}
		if i > 0 {
			if err := s.sleep(ctx, latency); err != nil {
				s.waitOutcome(err)
				return
			}
		}
		// The client may have gone while we were busy; that is what a
		// real engine notices and what tests assert on.
		if ctx.Err() != nil {
			s.end(outcomeCancelled)
			return
		}
		if err := sse.event(chunks[i]); err != nil {
			s.end(outcomeCancelled)
			return
		}
	}
	if err := sse.done(); err != nil {
		s.end(outcomeCancelled)
		return
	}
	s.end(outcomeCompleted)
}

// newHead is the envelope every chunk of one answer shares: its id, its
// object, the time and the model (the request's, else the first served).
func newHead[C, U any](s *Server, model, id, object string) chunkEnvelope[C, U] {
	if model == "" {
		model = s.opts.Models[0]
	}
	return chunkEnvelope[C, U]{ID: id, Object: object, Created: s.opts.Now().Unix(), Model: model}
}

// answer sends a turn: its chunks as SSE, or, without stream, the whole
// answer whole() builds, after as long as the stream would have taken.
// Every endpoint ends through it, so latency and the failure directives
// mean the same on each.
func answer[T any](s *Server, w http.ResponseWriter, r *http.Request, t *turn, stream bool, chunks []T, whole func() any) {
	latency := s.opts.Latency
	if t.hasLatency {
		latency = t.latency
	}
	if stream {
		streamEvents(s, w, r, chunks, t, latency)
		return
	}
	if err := s.sleep(r.Context(), latency*time.Duration(len(chunks)-1)); err != nil {
		s.waitOutcome(err)
		return
	}
	writeJSON(w, http.StatusOK, whole())
	s.end(outcomeCompleted)
}
