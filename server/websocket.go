package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tenant"
)

// WebSocket mode: a client upgrades GET /v1/responses and sends
// response.create messages (the body of POST /v1/responses, with "type");
// each runs like a streamed POST, and its events come back as text frames,
// the same JSON as the SSE data lines, in order. One with generate false
// (a client's warm-up) is prepared without calling the model: it completes
// with no output, for the next response.create to continue.
//
// Responses run in lanes (websocketlanes.go): a response.create without
// stream_id is the default stream's, one response at a time as before
// lanes existed; one with a stream_id runs in that named lane, beside the
// others. response.inject adds input to a running response
// (websocketinject.go). Writes block: a client that stops reading stops
// its responses at their next event, and nothing queues up in memory.

// maxErrorMessage caps the message of an error event, as error bodies
// are capped.
const maxErrorMessage = 1024

// socketStatusPreviousNotFound is the HTTP-style status of WebSocket error events for
// previous_response_not_found, as OpenAI's WebSocket mode sends it.
const socketStatusPreviousNotFound = http.StatusBadRequest

// socketErrorEvent is the error envelope of WebSocket mode: a status and
// the error object of an HTTP error body.
type socketErrorEvent struct {
	Type   string      `json:"type"`
	Status int         `json:"status"`
	Error  socketError `json:"error"`
	// StreamID is the lane of the response.create or response.inject the
	// error answers; none for the default stream.
	StreamID string `json:"stream_id,omitempty"`
}

type socketError struct {
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// sockets tracks the open WebSocket connections, which http.Server's
// Shutdown does not wait for: it forgets hijacked connections.
type sockets struct {
	wg           sync.WaitGroup
	shutdownOnce sync.Once
	shutdown     chan struct{}

	// mu guards slots, the connections counted against the caps
	// (websocketlimits.go).
	mu    sync.Mutex
	slots socketSlots
	// afterFunc starts a connection's age timer: time.AfterFunc's, or a
	// test's.
	afterFunc func(d time.Duration, f func()) (stop func() bool)
}

// CloseSockets tells every WebSocket connection to close once its running
// response (if any) has ended, and refuses new ones. Register it with
// http.Server.RegisterOnShutdown.
func (s *Server) CloseSockets() {
	s.sockets.shutdownOnce.Do(func() { close(s.sockets.shutdown) })
}

// WaitSockets waits until every WebSocket connection has closed, or ctx is
// done (it returns ctx's error then). Call it after http.Server.Shutdown.
func (s *Server) WaitSockets(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.sockets.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// responsesSocket serves GET /v1/responses: the WebSocket upgrade.
func (s *Server) responsesSocket(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		w.Header().Set("Upgrade", "websocket")
		writeError(w, &responses.APIError{Kind: kindUpgradeRequired, Type: responses.ErrInvalidRequest, Code: "upgrade_required",
			Message: "GET /v1/responses is the WebSocket mode endpoint: upgrade the connection, or POST to create a response"})
		return
	}
	dialect, err := s.dialect(r)
	if err != nil {
		writeError(w, err)
		return
	}
	select {
	case <-s.sockets.shutdown:
		writeError(w, &responses.APIError{Kind: responses.EUnavailable, Type: responses.ErrServer, Code: "shutting_down", Message: "the server is shutting down"})
		return
	default:
	}
	// Past a cap the upgrade is refused before it happens: nothing is
	// started for a connection that is not taken.
	release, refused := s.admitSocket(tenant.From(r.Context()))
	if refused != nil {
		refuseSocket(w, refused)
		return
	}
	s.sockets.wg.Add(1)
	defer s.sockets.wg.Done()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		// Accept has answered the client.
		release()
		s.log.Debug("websocket accept", "err", err)
		return
	}
	c.SetReadLimit(s.opts.MaxBodyBytes)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sc := &socketConn{s: s, c: c, dialect: dialect, ctx: ctx, cancel: cancel,
		aged: make(chan struct{}), release: release, sessionID: sessionHeader(r.Header)}
	sc.openDefaultStream()
	stopAge := s.startAge(sc)
	defer stopAge()
	sc.serve()
}

// socketConn is one WebSocket connection.
type socketConn struct {
	s       *Server
	c       *websocket.Conn
	dialect responses.Dialect
	// ctx ends when the client goes away (a read fails, a ping is not
	// answered): every lane's running response is cancelled as on an SSE
	// disconnect.
	ctx    context.Context
	cancel context.CancelFunc
	// aged is closed when the connection is older than MaxWebSocketAge;
	// release gives back its slot under the caps.
	aged    chan struct{}
	release func()
	// sessionID is the client's session header on the upgrade, for
	// every response of the connection.
	sessionID string
	// defaultStream is the lane of the responses without stream_id, run
	// by the connection's own goroutine.
	defaultStream *socketLane
	// lanesDone counts the named lanes' goroutines.
	lanesDone sync.WaitGroup

	// mu guards the lanes and what is counted across them
	// (websocketlanes.go).
	mu    sync.Mutex
	lanes socketLanes
}

// serve runs the connection until the client leaves or the server shuts
// down, then closes it and waits for its goroutines.
func (sc *socketConn) serve() {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc.read()
	}()
	go func() {
		defer wg.Done()
		sc.ping()
	}()
	status, reason := sc.wait()
	// The slot is free before the client sees the close: a client that
	// reconnects on it is not refused for the connection it left.
	sc.release()
	sc.c.Close(status, reason)
	sc.cancel()
	wg.Wait()
}

// wait runs the default stream's responses, in order, on the
// connection's own goroutine, until the client leaves, the server shuts
// down, or the connection ages. Then it waits for the named lanes, which
// start no response once the connection is closing: a running response
// is never cut by a shutdown or the age, only by the client leaving. It
// returns the close status to send.
func (sc *socketConn) wait() (status websocket.StatusCode, reason string) {
	def := sc.defaultStream
	for status == 0 {
		// Shutdown and age first: a create that arrives with them is not
		// started. Both are looked at only between responses, so that a
		// running response is never cut by them.
		select {
		case <-sc.s.sockets.shutdown:
			status, reason = websocket.StatusGoingAway, "server shutting down"
		case <-sc.ctx.Done():
			status, reason = websocket.StatusNormalClosure, ""
		case <-sc.aged:
			status, reason = socketAgeStatus, socketAgeReason
		default:
			select {
			case <-sc.s.sockets.shutdown:
				status, reason = websocket.StatusGoingAway, "server shutting down"
			case <-sc.ctx.Done():
				status, reason = websocket.StatusNormalClosure, ""
			case <-sc.aged:
				status, reason = socketAgeStatus, socketAgeReason
			case data := <-def.creates:
				def.createCaught(data)
			}
		}
	}
	sc.mu.Lock()
	sc.lanes.stopping = true
	sc.mu.Unlock()
	def.refuseWaiting()
	sc.lanesDone.Wait()
	return status, reason
}

// closing reports whether the connection is to close: the client left,
// the server shuts down, or the connection aged. A lane looks at it
// between responses: it starts no other then.
func (sc *socketConn) closing() bool {
	select {
	case <-sc.s.sockets.shutdown:
	case <-sc.ctx.Done():
	case <-sc.aged:
	default:
		return false
	}
	return true
}

// isAged reports whether the connection is older than MaxWebSocketAge.
func (sc *socketConn) isAged() bool {
	select {
	case <-sc.aged:
		return true
	default:
		return false
	}
}

// read reads the client's messages until the connection ends. Reading all
// the time is also what answers pings and notices a close at once.
func (sc *socketConn) read() {
	defer sc.cancel()
	for {
		typ, data, err := sc.c.Read(sc.ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			sc.sendError("", responses.BadRequest("", "messages must be JSON text frames"))
			continue
		}
		var head struct {
			Type     string          `json:"type"`
			StreamID json.RawMessage `json:"stream_id"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			sc.sendError("", responses.BadRequest("", "the message is not a JSON object"))
			continue
		}
		switch head.Type {
		case "response.create":
			sc.dispatch(data, head.StreamID)
		case "response.inject":
			sc.inject(data)
		case "":
			sc.sendError("", responses.BadRequest("type", "the message needs a type: response.create or response.inject"))
		default:
			sc.sendError("", responses.BadRequest("type", "unsupported client event type %q: loom accepts response.create and response.inject", head.Type))
		}
	}
}

// ping sends a ping every keep-alive interval; a client that does not
// answer within an interval is gone.
func (sc *socketConn) ping() {
	t := time.NewTicker(sc.s.opts.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-sc.ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(sc.ctx, sc.s.opts.KeepAlive)
		err := sc.c.Ping(pctx)
		cancel()
		if err != nil {
			sc.cancel()
			return
		}
	}
}

// sendError writes an error event, of lane stream ("" for the default
// stream: the event then has no stream_id). Errors that are not API errors
// are internal: the client sees a generic 500.
func (sc *socketConn) sendError(stream string, err error) {
	status, apiErr := apiError(err)
	msg := apiErr.Message
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	ev := socketErrorEvent{Type: "error", Status: status, StreamID: stream, Error: socketError{
		Type: apiErr.Type, Code: apiErr.Code, Message: msg}}
	if apiErr.Param != "" {
		ev.Error.Param = &apiErr.Param
	}
	if apiErr.Param == "previous_response_id" && apiErr.Kind == responses.ENotFound {
		ev.Status, ev.Error.Code = socketStatusPreviousNotFound, "previous_response_not_found"
	}
	if ev.Error.Code == "" {
		ev.Error.Code = apiErr.Type
	}
	b, _ := json.Marshal(ev)
	if len(b) > 0 {
		sc.c.Write(sc.ctx, websocket.MessageText, b)
	}
}
