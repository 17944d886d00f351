package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
)

// Lanes: several responses at once on one connection, as in OpenAI's
// WebSocket mode. A response.create with a stream_id runs in the lane of
// that name, after the lane's earlier responses (first in, first out) and
// beside the other lanes' responses; every event of the response carries
// the stream_id. Without one it runs in the default stream, exactly as a
// connection ran before lanes: one response at a time, one more waiting,
// a third refused with response_in_progress, and no stream_id on its
// events or errors.
//
// A lane keeps its latest response's conversation (engine.Continuation),
// so that a store false response can be continued with
// previous_response_id on the connection: each lane its own, so that one
// lane's responses do not evict another's. A response may continue the
// latest of any lane (a new lane forks from another), as a stored response
// can be continued from any lane.
//
// OpenAI's limits are kept: socketMaxActive responses accepted and not
// ended at once (running or waiting) and socketMaxStreams named lanes over
// the connection's life; past either, the response.create gets an error
// event naming stream_id. Writes from several lanes go through the
// connection's one writer (websocket.Conn.Write is safe for concurrent
// use and writes a message whole): a lane's events stay in order among
// themselves, interleaved with the other lanes'. A lane's failed response
// is an error event or a failed response on that lane alone; the client
// leaving cancels every lane's response.

// socketQueue is how many response.create messages may wait behind the
// default stream's running one.
const socketQueue = 1

// OpenAI's limits of WebSocket mode, per connection.
const (
	// socketMaxActive is how many responses may be accepted and not ended
	// at once, over all lanes.
	socketMaxActive = 16
	// socketMaxStreams is how many named lanes a connection may open.
	socketMaxStreams = 32
	// socketMaxStreamID is the longest stream_id.
	socketMaxStreamID = 256
)

// socketLanes is what a connection knows of its lanes; its fields are
// guarded by socketConn.mu.
type socketLanes struct {
	// byName holds the lanes opened, the default stream under "".
	byName map[string]*socketLane
	// named counts the named lanes opened.
	named int
	// active counts the responses accepted and not ended.
	active int
	// stopping is set once the connection's goroutine waits for the
	// lanes' (lanesDone): no goroutine is started after it.
	stopping bool
	// ended are the latest responses that ended on the connection, the
	// newest last, so that an injection into one of them is answered
	// response_already_completed (websocketinject.go).
	ended []*laneRun
}

// socketMaxEnded is how many ended responses a connection remembers for
// injections that come too late.
const socketMaxEnded = 64

// socketLane is one lane of a connection: the default stream or a named
// one.
type socketLane struct {
	sc *socketConn
	// name is the lane's stream_id, "" for the default stream.
	name string
	// creates carries the lane's response.create messages from the reader
	// to the lane's goroutine, which runs them in order.
	creates chan []byte
	// last is the conversation of the lane's latest response (guarded by
	// sc.mu: another lane may fork from it, or evict it).
	last *engine.Continuation
	// running is the lane's running response (guarded by sc.mu), nil
	// between responses.
	running *laneRun
	// busy is set while the lane's goroutine runs (guarded by sc.mu): it
	// runs while responses wait, and is started again by the next one.
	busy bool
	// enc and frame are the lane goroutine's buffers for an event's
	// encoding and its frame.
	enc, frame []byte
}

// laneRun is one response of a lane.
type laneRun struct {
	lane *socketLane
	// id is the response's id, known from its first event (guarded by
	// sc.mu).
	id string
	// inbox takes the input injected into the response.
	inbox *engine.Inbox
	// ended counts the response as ended on the connection (once): when
	// its terminal event is written, before the client can send the next
	// create, or when its create returns.
	ended func()

	// mu guards the numbering of the events the lane adds to the
	// response's (the answers to injections), which the reader may write
	// too once the response has ended.
	mu sync.Mutex
	// next is the sequence number of the response's next event on the
	// socket; added is how many events the lane added, by which the
	// engine's numbers are shifted.
	next, added int
}

// streamName returns the lane a response.create names: "" for the default
// stream (no stream_id, or null), or a stream_id as OpenAI allows them.
func streamName(raw json.RawMessage) (string, *responses.APIError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return "", responses.BadRequest("stream_id", "stream_id must be a string")
	}
	if !validStreamName(name) {
		return "", &responses.APIError{Kind: responses.EInvalid, Type: responses.ErrInvalidRequest, Code: "invalid_stream_id", Param: "stream_id",
			Message: fmt.Sprintf("stream_id must be 1 to %d characters of A-Z, a-z, 0-9, '_', '.' and '-'", socketMaxStreamID)}
	}
	return name, nil
}

func validStreamName(name string) bool {
	if len(name) == 0 || len(name) > socketMaxStreamID {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// dispatch hands a response.create to its lane, opening the lane (and its
// goroutine) at its first response, or refuses it with an error event.
func (sc *socketConn) dispatch(data []byte, streamID json.RawMessage) {
	name, apiErr := streamName(streamID)
	if apiErr != nil {
		// A stream_id that is not one belongs to no lane: the default
		// stream's error.
		sc.sendError("", apiErr)
		return
	}
	refused := sc.admit(name, data)
	if refused != nil {
		sc.sendError(name, refused)
	}
}

// admit queues data on lane name, or returns the error that refuses it.
func (sc *socketConn) admit(name string, data []byte) *responses.APIError {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	ls := &sc.lanes
	switch {
	case sc.isAged():
		return socketAgeError()
	case ls.stopping || sc.closing():
		// The connection closes: nothing more starts (the default
		// stream's create was never answered then either).
		return nil
	}
	l := ls.byName[name]
	if l == nil && name != "" && ls.named >= socketMaxStreams {
		return &responses.APIError{Kind: responses.EInvalid, Type: responses.ErrInvalidRequest, Code: "too_many_streams", Param: "stream_id",
			Message: fmt.Sprintf("this connection has opened %d named streams, its limit; reuse a stream_id, or open another connection", socketMaxStreams)}
	}
	if ls.active >= socketMaxActive {
		return &responses.APIError{Kind: responses.EInvalid, Type: responses.ErrInvalidRequest, Code: "too_many_active_responses", Param: "stream_id",
			Message: fmt.Sprintf("%d responses are running or waiting on this connection, its limit; send this one once one has ended, or open another connection", socketMaxActive)}
	}
	if l == nil {
		l = &socketLane{sc: sc, name: name, creates: make(chan []byte, socketMaxActive)}
		ls.byName[name] = l
		ls.named++
	}
	select {
	case l.creates <- data:
		ls.active++
		if !l.busy {
			// An idle lane holds no goroutine.
			l.busy = true
			sc.lanesDone.Add(1)
			go l.loop()
		}
		return nil
	default:
		// Only the default stream's queue can be full: a named lane's
		// holds as many as may be active.
		return &responses.APIError{Kind: responses.EConflict, Type: responses.ErrInvalidRequest, Code: "response_in_progress",
			Message: "a response is already running on this connection and another is waiting; send the next response.create after response.completed, give it a stream_id to run it beside, or open another connection"}
	}
}

// openDefaultStream opens the default stream's lane, whose responses the
// connection's own goroutine runs (socketConn.wait).
func (sc *socketConn) openDefaultStream() {
	// Never started: busy for good.
	sc.defaultStream = &socketLane{sc: sc, creates: make(chan []byte, socketQueue), busy: true}
	sc.lanes.byName = map[string]*socketLane{"": sc.defaultStream}
}

// responseEnded counts a response of the connection as ended.
func (sc *socketConn) responseEnded() {
	sc.mu.Lock()
	sc.lanes.active--
	sc.mu.Unlock()
}

// loop runs the lane's waiting responses in order, and returns once none
// waits or the connection closes.
func (l *socketLane) loop() {
	sc := l.sc
	defer sc.lanesDone.Done()
	for {
		// A closing connection first: a create that arrives with it is
		// not started. It is looked at only between responses, so that
		// a running response is never cut by a shutdown or the age.
		// Once it is closing nothing more is queued (admit).
		if sc.closing() {
			sc.mu.Lock()
			l.busy = false
			sc.mu.Unlock()
			l.refuseWaiting()
			return
		}
		// One waits: the goroutine was started, or went on, for it.
		l.createCaught(<-l.creates)
		sc.mu.Lock()
		idle := len(l.creates) == 0
		if idle {
			l.busy = false
		}
		sc.mu.Unlock()
		if idle {
			return
		}
	}
}

// refuseWaiting answers the response.create messages waiting in the lane
// when the connection aged: they are not started. On a shutdown or a
// client gone they are not answered.
func (l *socketLane) refuseWaiting() {
	if !l.sc.isAged() {
		return
	}
	for {
		select {
		case <-l.creates:
			l.sc.sendError(l.name, socketAgeError())
		default:
			return
		}
	}
}

// create runs one response.create of the lane; the response counts as
// ended on the connection when its terminal event is written, or at the
// latest when create returns (even by a panic).
func (l *socketLane) create(data []byte) {
	sc := l.sc
	ended := sync.OnceFunc(sc.responseEnded)
	defer ended()
	req, apiErr := responses.DecodeRequest(data)
	if apiErr != nil {
		sc.sendError(l.name, apiErr)
		return
	}
	// Events are the only way a response reaches the client here.
	req.Stream = true
	run := &laneRun{lane: l, inbox: &engine.Inbox{}, ended: ended}
	sc.mu.Lock()
	from, prev := sc.previous(l, req.PreviousResponseID)
	l.running = run
	sc.mu.Unlock()
	opts := &engine.RunOptions{Previous: prev, GiveInput: true, SessionID: sc.sessionID, Inbox: run.inbox,
		NoGenerate: req.Generate != nil && !*req.Generate}
	// Kept before the terminal event goes out (engine.RunOptions.Keep):
	// a client that has it may continue or fork the response at once,
	// on any lane.
	opts.Keep = func(c *engine.Continuation) {
		if c.Status == responses.ResponseCompleted || c.Status == responses.ResponseIncomplete {
			sc.mu.Lock()
			l.last = c
			sc.mu.Unlock()
		}
	}
	resp, err := sc.s.engine.RunWith(sc.ctx, req, func(ev *responses.Event) error { return l.event(run, ev) }, opts)
	// Input injected too late for the response is handed back.
	run.inbox.Close()
	sc.s.countResponse(resp, err)

	sc.mu.Lock()
	l.running = nil
	if run.id != "" {
		sc.lanes.ended = append(sc.lanes.ended, run)
		if len(sc.lanes.ended) > socketMaxEnded {
			sc.lanes.ended = sc.lanes.ended[1:]
		}
	}
	if prev != nil && from == l && l.last == prev {
		// A failed continuation evicts the lane's response it continued
		// (the client recovers by sending its full input); a fork that
		// failed leaves the other lane's alone.
		l.last = nil
	}
	sc.mu.Unlock()
	if resp == nil {
		if err == nil {
			err = errors.New("response produced no events")
		}
		ended()
		sc.sendError(l.name, err)
	}
}

// createCaught is create with a panic caught: logged with its stack, a
// server error on the lane, and the connection closed, since what the
// response held may be left half done. Uncaught, a panic in a named lane
// would end the whole process, and one in the default stream (on the
// handler's goroutine, which net/http recovers) would skip the
// connection's teardown and keep its slot under the caps for good.
func (l *socketLane) createCaught(data []byte) {
	defer func() {
		if v := recover(); v != nil {
			l.sc.s.log.Error("websocket lane panicked", "stream_id", l.name, "panic", v, "stack", string(debug.Stack()))
			l.sc.sendError(l.name, fmt.Errorf("panic: %v", v))
			l.sc.cancel()
		}
	}()
	l.create(data)
}

// previous returns the conversation kept in memory that a response
// continuing id continues, and the lane that keeps it: the lane's own
// latest response first, else another lane's. nil when id continues none
// of them (the engine then reads the store). sc.mu is held.
func (sc *socketConn) previous(l *socketLane, id *string) (*socketLane, *engine.Continuation) {
	if id == nil {
		return nil, nil
	}
	if l.last != nil && l.last.ResponseID == *id {
		return l, l.last
	}
	for _, other := range sc.lanes.byName {
		if other.last != nil && other.last.ResponseID == *id {
			return other, other.last
		}
	}
	return nil, nil
}

// event writes one event of the lane's running response. The write blocks
// until the frame is out: a slow reader slows the response down instead
// of growing a queue.
func (l *socketLane) event(run *laneRun, ev *responses.Event) error {
	sc := l.sc
	if ev.Response != nil && ev.Type == responses.EventCreated {
		sc.mu.Lock()
		run.id = ev.Response.ID
		sc.mu.Unlock()
	}
	enc, err := ev.AppendJSON(l.enc[:0], sc.dialect)
	if err != nil {
		return err
	}
	l.enc = enc
	run.mu.Lock()
	added := run.added
	run.next = ev.SequenceNumber + added + 1
	run.mu.Unlock()
	if ev.Terminal() {
		// Ended before the client sees it end, so that its next create
		// finds the room.
		run.ended()
	}
	frame := enc
	if l.name != "" || added != 0 {
		if frame, err = laneFrame(l.frame[:0], enc, added, l.name); err != nil {
			return err
		}
		l.frame = frame
	}
	return sc.c.Write(sc.ctx, websocket.MessageText, frame)
}

// sequencePrefix is what precedes an event's sequence number in its
// encoding: {"type":"...","sequence_number":N,... (responses.Event's
// AppendJSON writes the two fields first).
var sequencePrefix = []byte(`,"sequence_number":`)

// laneFrame appends to dst the event encoded in enc as a lane sends it:
// its sequence number shifted by the events the lane added to the
// response's, and the lane's stream_id after it (none for the default
// stream).
func laneFrame(dst, enc []byte, shift int, stream string) ([]byte, error) {
	i := bytes.Index(enc, sequencePrefix)
	if i < 0 {
		return nil, errors.New("websocket lane: an event encoding without sequence_number")
	}
	start := i + len(sequencePrefix)
	end := start
	for end < len(enc) && enc[end] >= '0' && enc[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(string(enc[start:end]))
	if err != nil {
		return nil, fmt.Errorf("websocket lane: sequence_number: %w", err)
	}
	dst = append(dst, enc[:start]...)
	dst = strconv.AppendInt(dst, int64(n+shift), 10)
	if stream != "" {
		// A stream name is letters, digits and _.-: nothing to escape.
		dst = append(dst, `,"stream_id":"`...)
		dst = append(dst, stream...)
		dst = append(dst, '"')
	}
	return append(dst, enc[end:]...), nil
}

// addEvent writes an event the lane adds to run's (an answer to an
// injection): numbered next in the response's sequence, with the lane's
// stream_id. body appends the event's other fields.
func (l *socketLane) addEvent(run *laneRun, typ string, body func(dst []byte) []byte) {
	// Numbered and written under one lock: two answers written by two
	// goroutines (the lane's, the reader's) go out in their order.
	run.mu.Lock()
	defer run.mu.Unlock()
	seq := run.next
	run.next++
	run.added++
	b := []byte(`{"type":`)
	b = strconv.AppendQuote(b, l.sc.dialect.EventType(typ))
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	if l.name != "" {
		b = append(b, `,"stream_id":"`...)
		b = append(b, l.name...)
		b = append(b, '"')
	}
	b = body(b)
	b = append(b, '}')
	l.sc.c.Write(l.sc.ctx, websocket.MessageText, b)
}
