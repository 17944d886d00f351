package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
)

// createResponse serves POST /v1/responses, as JSON or as an event stream.
// sessionHeader is the client's session id, one source of a response's
// session key (engine.RunOptions.SessionID): Codex sends session_id;
// session-id is the same with a dash.
func sessionHeader(h http.Header) string {
	if id := h.Get("session_id"); id != "" {
		return id
	}
	return h.Get("Session-Id")
}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	dialect, err := s.dialect(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if apiErr := checkJSONContentType(r); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	req, err := s.decodeRequest(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	if !req.Stream {
		// The request is the server's own: the run takes its input items
		// rather than copying them.
		resp, err := s.engine.RunWith(r.Context(), req, nil, &engine.RunOptions{GiveInput: true, SessionID: sessionHeader(r.Header)})
		s.countResponse(resp, err)
		if err != nil {
			writeError(w, err)
			return
		}
		writeResponse(w, resp, dialect)
		return
	}
	sse := newSSEWriter(w, dialect, s.opts.KeepAlive)
	defer sse.Close()
	// The engine says when the upstream has nothing more buffered: the
	// events of a burst go out in one write.
	sse.coalesce = true
	resp, err := s.engine.RunWith(r.Context(), req, sse.Event, &engine.RunOptions{Flush: sse.Flush, GiveInput: true, SessionID: sessionHeader(r.Header)})
	s.countResponse(resp, err)
	if !sse.Started() {
		// Nothing was streamed: the request never started.
		if err == nil {
			err = errors.New("response produced no events")
		}
		writeError(w, err)
		return
	}
	sse.Done()
}

// checkJSONContentType refuses a body declared as something other than
// JSON with a 415. A request without a Content-Type is read as JSON.
func checkJSONContentType(r *http.Request) *responses.APIError {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" {
		// What the SDKs send, without a parse (and its map) per request.
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &responses.APIError{Kind: kindUnsupportedMedia, Type: responses.ErrInvalidRequest, Code: "unsupported_media_type",
		Message: "the request body must be JSON (Content-Type: application/json), got " + strconv.Quote(ct)}
}

// decodeRequest reads and decodes a create request: 413 past the size
// limit, 400 naming the field for a value of the wrong type.
func (s *Server) decodeRequest(w http.ResponseWriter, r *http.Request) (*responses.Request, error) {
	body, err := s.readRequestBody(w, r)
	if err != nil {
		return nil, err
	}
	req, apiErr := responses.DecodeRequest(body)
	if apiErr != nil {
		return nil, apiErr
	}
	return req, nil
}

// readRequestBody reads a request's body: a 413 past the size limit, a
// 408 for a body not received in time.
func (s *Server) readRequestBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), r.ContentLength, s.opts.MaxBodyBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &responses.APIError{Kind: kindTooLarge, Type: responses.ErrInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("request body is larger than %d bytes", s.opts.MaxBodyBytes)}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &responses.APIError{Kind: kindRequestTimeout, Type: responses.ErrInvalidRequest, Code: "request_timeout",
				Message: fmt.Sprintf("the request body was not received within %s", s.opts.BodyReadTimeout)}
		}
		return nil, responses.BadRequest("", "could not read the request body")
	}
	return body, nil
}

// readBody reads a body of the declared length (-1: unknown) into one
// buffer of that size, where io.ReadAll would grow it by doubling and
// hold about twice a large body at once. body is bounded by limit (a
// MaxBytesReader), so a declared length past it is read the plain way
// and fails there.
func readBody(body io.Reader, length, limit int64) ([]byte, error) {
	if length <= 0 || length > limit {
		return io.ReadAll(body)
	}
	buf := make([]byte, length)
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// dialect returns the event dialect of the request: the header if set,
// else the server's default.
func (s *Server) dialect(r *http.Request) (responses.Dialect, error) {
	h := r.Header.Get(DialectHeader)
	if h == "" {
		return s.opts.Dialect, nil
	}
	d, err := responses.ParseDialect(h)
	if err != nil {
		return 0, &responses.APIError{Kind: responses.EInvalid, Type: responses.ErrInvalidRequest, Message: err.Error()}
	}
	return d, nil
}

// getResponse serves GET /v1/responses/{id}; with stream=true it replays
// the stored events after starting_after.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) {
	dialect, err := s.dialect(r)
	if err != nil {
		writeError(w, err)
		return
	}
	stream, apiErr := wantsStream(r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	id := r.PathValue("id")
	body, err := s.engine.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if stream {
		s.replay(w, r, id, dialect)
		return
	}
	s.writeStored(w, body, dialect)
}

// writeStored answers with a stored response object in dialect.
func (s *Server) writeStored(w http.ResponseWriter, body json.RawMessage, dialect responses.Dialect) {
	if dialect != responses.DialectOpenAI {
		var resp responses.Response
		if err := json.Unmarshal(body, &resp); err != nil {
			writeError(w, err)
			return
		}
		writeResponse(w, &resp, dialect)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// writeResponse answers with the response object in dialect, written by
// its encoder into a buffer borrowed for the length of the write.
// contentTypeJSON is the Content-Type of every JSON response; net/http
// only reads it.
var contentTypeJSON = []string{"application/json"}

func writeResponse(w http.ResponseWriter, resp *responses.Response, dialect responses.Dialect) {
	buf := frameBuffers.Get().(*[]byte)
	body := append(resp.AppendJSON((*buf)[:0], dialect), '\n')
	h := w.Header()
	// Canonical keys set directly: Set would canonicalise them again.
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	if cap(body) <= 4*maxPending {
		*buf = body[:0]
		frameBuffers.Put(buf)
	}
}

// wantsStream reports whether a retrieve asks for the event stream: the
// query has stream=true, or (as openai-go sends it) a small JSON body
// {"stream": true} comes with the GET. A stream value that is not a
// boolean is a 400.
func wantsStream(r *http.Request) (bool, *responses.APIError) {
	if q := r.URL.Query(); q.Has("stream") {
		v, err := strconv.ParseBool(q.Get("stream"))
		if err != nil {
			return false, responses.BadRequest("stream", "stream must be true or false, got %q", q.Get("stream"))
		}
		if v {
			return true, nil
		}
	}
	if r.Body == nil || r.ContentLength == 0 {
		return false, nil
	}
	var body struct {
		Stream bool `json:"stream"`
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	return err == nil && json.Unmarshal(b, &body) == nil && body.Stream, nil
}

// replay streams a stored response's events after starting_after and,
// while the response runs (a background one, on any replica), the events
// that follow, until its last.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, id string, dialect responses.Dialect) {
	after := -1
	if v := r.URL.Query().Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, responses.BadRequest("starting_after", "starting_after must be a non-negative integer"))
			return
		}
		after = n
	}
	sse := newSSEWriter(w, dialect, s.opts.KeepAlive)
	defer sse.Close()
	// The response exists (getResponse read it): the stream starts now,
	// so that a response still queued gets keep-alives until it runs.
	if sse.Open() != nil {
		return
	}
	err := s.engine.Follow(r.Context(), id, after, func(ev json.RawMessage) error {
		var head struct {
			Type string `json:"type"`
		}
		json.Unmarshal(ev, &head)
		data, err := dialect.Rewrite(ev)
		if err != nil {
			s.log.ErrorContext(r.Context(), "replay: stored event is not valid JSON", "id", id, "err", err)
			return err
		}
		return sse.Raw(head.Type, data)
	})
	if err != nil {
		if !sse.Started() {
			writeError(w, err)
		}
		return
	}
	sse.Done()
}

// deleteByID serves a DELETE of the object named by the path's id:
// remove deletes it, and the answer is the deletion object of that type
// (response.deleted, conversation.deleted).
func (s *Server) deleteByID(object string, remove func(ctx context.Context, id string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := remove(r.Context(), id); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": object, "deleted": true})
	}
}

// cancelResponse serves POST /v1/responses/{id}/cancel: a background
// response, queued or running on any replica, ends cancelled; a finished
// one comes back unchanged; any other is a 400.
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) {
	dialect, err := s.dialect(r)
	if err != nil {
		writeError(w, err)
		return
	}
	body, err := s.engine.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeStored(w, body, dialect)
}

// listInputItems serves GET /v1/responses/{id}/input_items.
func (s *Server) listInputItems(w http.ResponseWriter, r *http.Request) {
	page, ok := itemPage(w, r)
	if !ok {
		return
	}
	items, more, err := s.engine.InputItems(r.Context(), r.PathValue("id"), page)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, newItemList(items, more))
}

// listModels serves GET /v1/models. Without a configured model list loom
// accepts any name, and an empty list would say it serves none: that is a
// 404 saying so instead.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if len(s.engine.Models()) == 0 {
		writeError(w, &responses.APIError{Kind: responses.ENotFound, Type: responses.ErrNotFound, Code: "model_list_not_configured",
			Message: "this server has no model list (start loom with --model) and passes any model name to its upstream"})
		return
	}
	type modelEntry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := []modelEntry{}
	for _, m := range s.engine.Models() {
		data = append(data, modelEntry{ID: m, Object: "model", OwnedBy: "loom"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// countResponse counts a response by its final status ("rejected" for a
// request that never started).
func (s *Server) countResponse(resp *responses.Response, err error) {
	if s.opts.Metrics == nil {
		return
	}
	status := "rejected"
	if resp != nil {
		status = resp.Status
	}
	s.opts.Metrics.observeResponse(status)
}
