package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// Issue 35, finding 9: WebSocket mode had no cap on open connections and no
// age limit.

// newSocketServer is newServer, returning the *server.Server too.
func newSocketServer(t *testing.T, b model.Backend, opts *server.Options) (*httptest.Server, *server.Server) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := server.New(engine.New(b, db, &engine.Options{Models: []string{"m"}}), opts)
	return httptest.NewUnstartedServer(s), s
}

// dialAs opens a WebSocket with token (none if empty). It returns the
// connection, or the refusal's status, Retry-After and body.
func dialAs(t *testing.T, url, token string) (*websocket.Conn, int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{HTTPHeader: http.Header{}}
	if token != "" {
		opts.HTTPHeader.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/responses", opts)
	if err == nil {
		t.Cleanup(func() { c.CloseNow() })
		return c, http.StatusSwitchingProtocols, "", ""
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	return nil, resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// roundTrip runs one response on c, so that the server's side of it is
// certainly up (its goroutines started).
func roundTrip(t *testing.T, c *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	readCompleted(t, ctx, c)
}

// socketGoroutines counts the goroutines serving WebSocket connections:
// three per open connection (the handler's, its reader and its pinger).
func socketGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "loom/server.(*socketConn)") || strings.Contains(g, "loom/server.(*Server).responsesSocket") {
			count++
		}
	}
	return count
}

// checkRefused checks an upgrade refused past a cap: a 429 in the API's
// error shape, with Retry-After.
func checkRefused(t *testing.T, why string, status int, retryAfter, body, wantMessage string) {
	t.Helper()
	var e struct {
		Error struct {
			Message, Type, Code string
		} `json:"error"`
	}
	json.Unmarshal([]byte(body), &e)
	if status != http.StatusTooManyRequests || retryAfter != "5" || e.Error.Type != "rate_limit_error" ||
		e.Error.Code != "too_many_websockets" || !strings.Contains(e.Error.Message, wantMessage) {
		t.Errorf("%s: status %d, Retry-After %q, body %s; want a 429 too_many_websockets saying %q, Retry-After 5", why, status, retryAfter, body, wantMessage)
	}
}

func TestWebSocketCaps(t *testing.T) {
	srv, _ := newSocketServer(t, answer("hi"), &server.Options{
		MaxWebSockets: 3, MaxWebSocketsPerTenant: 2,
		Authenticators: []server.Authenticator{server.APIKeys{{Key: "ka", Tenant: "a"}, {Key: "kb", Tenant: "b"}}},
	})
	srv.Start()
	t.Cleanup(srv.Close)

	var open []*websocket.Conn
	for _, token := range []string{"ka", "ka", "kb"} {
		c, status, _, body := dialAs(t, srv.URL, token)
		if c == nil {
			t.Fatalf("connection %d of %s refused: %d %s", len(open)+1, token, status, body)
		}
		roundTrip(t, c)
		open = append(open, c)
	}
	before := socketGoroutines()
	if before != 3*len(open) {
		t.Fatalf("%d goroutines serve %d connections, want 3 each", before, len(open))
	}

	// Tenant a's third: its cap.
	c, status, retryAfter, body := dialAs(t, srv.URL, "ka")
	if c != nil {
		t.Fatal("tenant a's third connection was accepted past its cap of 2")
	}
	checkRefused(t, "a's third", status, retryAfter, body, "this tenant has 2")
	// Tenant b's second: b has one, but the server has 3, its cap.
	c, status, retryAfter, body = dialAs(t, srv.URL, "kb")
	if c != nil {
		t.Fatal("the fourth connection was accepted past the cap of 3")
	}
	checkRefused(t, "the fourth", status, retryAfter, body, "the server has 3")
	// The refused upgrades started nothing: the handler had returned
	// before the client read its 429 (net/http sends it then).
	if after := socketGoroutines(); after != before {
		t.Errorf("%d goroutines serve the connections after two refusals, %d before", after, before)
	}

	// A connection that closes gives its slot back.
	open[0].Close(websocket.StatusNormalClosure, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		c, status, _, body := dialAs(t, srv.URL, "ka")
		if c != nil {
			roundTrip(t, c)
			break
		}
		if status != http.StatusTooManyRequests || ctx.Err() != nil {
			t.Fatalf("reconnecting after a close: %d %s", status, body)
		}
		// The server frees the slot as the connection ends, just
		// after the client's close returned: try again.
		runtime.Gosched()
	}
}

// A connection past its age closes with 1000 and the reason
// websocket_connection_limit_reached once its running response has
// ended; a response.create waiting behind it is answered with that code.
// The age timer is the test's: the connection ages when the test says.
func TestWebSocketMaxAge(t *testing.T) {
	started, finish := make(chan struct{}, 1), make(chan struct{})
	b := backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		if req.Items[len(req.Items)-1].Text() == "slow" {
			started <- struct{}{}
			select {
			case <-finish:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := emit(model.Delta{Kind: model.DeltaText, Text: "done"}); err != nil {
			return err
		}
		return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})
	})
	srv, s := newSocketServer(t, b, &server.Options{MaxWebSocketAge: 42 * time.Minute, MaxWebSocketsPerTenant: 1})
	expires := make(chan func(), 4)
	server.SetWebSocketAgeTimer(s, func(d time.Duration, expire func()) func() bool {
		if d != 42*time.Minute {
			t.Errorf("age timer of %s, want the configured 42m", d)
		}
		expires <- expire
		return func() bool { return true }
	})
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nextExpire := func() func() {
		t.Helper()
		select {
		case expire := <-expires:
			return expire
		case <-ctx.Done():
			t.Fatal("the connection started no age timer")
			return nil
		}
	}

	// An idle connection past its age is closed.
	idle, status, _, body := dialAs(t, srv.URL, "")
	if idle == nil {
		t.Fatalf("dial: %d %s", status, body)
	}
	nextExpire()()
	_, _, err := idle.Read(ctx)
	checkAgeClose(t, "idle", err)

	// A connection whose response runs as it ages: the response ends,
	// then the connection closes. The slot of the idle one was freed
	// before its close frame left, so this one (tenant cap 1) is let in.
	c, status, _, body := dialAs(t, srv.URL, "")
	if c == nil {
		t.Fatalf("dial after the idle one closed: %d %s", status, body)
	}
	expire := nextExpire()
	send := func(input string) {
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"`+input+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	send("slow")
	<-started
	send("next")  // waits behind the running one
	send("third") // refused at once: both slots taken, so "next" is queued
	sawBusy := false
	for !sawBusy {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sawBusy = strings.Contains(string(data), `"response_in_progress"`)
	}
	expire() // the connection is past its age while "slow" runs
	close(finish)
	completed := readCompleted(t, ctx, c)
	if !strings.Contains(string(completed), `"text":"done"`) {
		t.Errorf("the running response: %s", completed)
	}
	_, data, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(data), `"code":"websocket_connection_limit_reached"`) || !strings.Contains(string(data), `"type":"error","status":400`) {
		t.Errorf("the waiting create: %s (%v), want an error event websocket_connection_limit_reached", data, err)
	}
	_, data, err = c.Read(ctx)
	checkAgeClose(t, "after the response", err)
	if err == nil {
		t.Errorf("an event after the waiting create was refused: %s", data)
	}
}

func checkAgeClose(t *testing.T, why string, err error) {
	t.Helper()
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || !strings.HasPrefix(ce.Reason, "websocket_connection_limit_reached") {
		t.Errorf("%s: %v, want a close 1000 with reason websocket_connection_limit_reached", why, err)
	}
}

// TestWebSocketMaxAgeLanes: a connection that ages while lane a runs a
// response: the response ends, the create waiting behind it on lane a and
// a create for lane b sent after the age are answered with
// websocket_connection_limit_reached on their lanes and never run, then
// the connection closes.
func TestWebSocketMaxAgeLanes(t *testing.T) {
	started, finish := make(chan struct{}, 1), make(chan struct{})
	var ran []string
	b := backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		text := req.Items[len(req.Items)-1].Text()
		ran = append(ran, text)
		if text == "slow" {
			started <- struct{}{}
			select {
			case <-finish:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := emit(model.Delta{Kind: model.DeltaText, Text: "done"}); err != nil {
			return err
		}
		return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})
	})
	srv, s := newSocketServer(t, b, &server.Options{MaxWebSocketAge: time.Minute})
	expires := make(chan func(), 1)
	server.SetWebSocketAgeTimer(s, func(d time.Duration, expire func()) func() bool {
		expires <- expire
		return func() bool { return true }
	})
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, c := dialSocket(t, srv.URL)
	expire := <-expires
	send := func(stream, input string) {
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","stream_id":"`+stream+`","input":"`+input+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	send("a", "slow")
	<-started
	send("a", "next") // waits behind "slow" on lane a
	expire()
	send("b", "after the age")
	refused := map[string]bool{}
	var completed bool
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			checkAgeClose(t, "after the lanes", err)
			break
		}
		var ev struct {
			Type     string `json:"type"`
			StreamID string `json:"stream_id"`
			Error    struct{ Code string }
		}
		json.Unmarshal(data, &ev)
		switch {
		case ev.Type == "error" && ev.Error.Code == "websocket_connection_limit_reached":
			refused[ev.StreamID] = true
			if ev.StreamID == "b" {
				// Lane b was refused at once: now "slow" may end.
				close(finish)
			}
		case ev.Type == "response.completed" && ev.StreamID == "a":
			completed = true
		case ev.Type == "error":
			t.Fatalf("unexpected error event: %s", data)
		}
	}
	if !completed || !refused["a"] || !refused["b"] {
		t.Errorf("completed %v, refused %v: want slow completed and a create refused on lanes a and b", completed, refused)
	}
	if len(ran) != 1 || ran[0] != "slow" {
		t.Errorf("the upstream ran %v, want only slow", ran)
	}
}

// TestWebSocketShutdownStartsNoLane: once the server shuts down, a lane
// starts no response, even while the default stream's runs on: that one
// ends, then the connection closes with 1001.
func TestWebSocketShutdownStartsNoLane(t *testing.T) {
	started, finish := make(chan struct{}, 1), make(chan struct{})
	var ran []string
	b := backendFunc(func(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
		text := req.Items[len(req.Items)-1].Text()
		ran = append(ran, text)
		if text == "slow" {
			started <- struct{}{}
			select {
			case <-finish:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := emit(model.Delta{Kind: model.DeltaText, Text: "done"}); err != nil {
			return err
		}
		return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})
	})
	srv, s := newSocketServer(t, b, nil)
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, c := dialSocket(t, srv.URL)
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"slow"}`))
	<-started
	s.CloseSockets()
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","stream_id":"b","input":"after the shutdown"}`))
	// The reader has taken the lane's create once the sync message's
	// error is back.
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"test.sync"}`))
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), `"param":"type"`) {
			break
		}
	}
	close(finish)
	readCompleted(t, ctx, c)
	_, _, err := c.Read(ctx)
	if status := websocket.CloseStatus(err); status != websocket.StatusGoingAway {
		t.Fatalf("after the response: %v, want close status 1001", err)
	}
	if len(ran) != 1 || ran[0] != "slow" {
		t.Errorf("the upstream ran %v, want only slow", ran)
	}
}
