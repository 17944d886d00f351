package mockllm

import (
	"encoding/json"
	"net/http"
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
