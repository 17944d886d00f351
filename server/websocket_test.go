package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/server"
)

func answer(text string) backendFunc {
	return func(ctx context.Context, _ *model.Request, emit func(model.Delta) error) error {
		if err := emit(model.Delta{Kind: model.DeltaText, Text: text}); err != nil {
			return err
		}
		return emit(model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishStop})
	}
}

func TestWebSocketNeedsTheAPIKey(t *testing.T) {
	srv := newServer(t, answer("hi"), &server.Options{APIKeys: []string{"secret"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/responses"
	_, resp, err := websocket.Dial(ctx, url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial without a key: %v (response %v), want a 401", err, resp)
	}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer secret"}}})
	if err != nil {
		t.Fatalf("dial with the key: %v", err)
	}
	c.CloseNow()
}

func TestWebSocketPlainGETIs426(t *testing.T) {
	srv := newServer(t, answer("hi"), nil)
	resp, err := http.Get(srv.URL + "/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("status %d, Upgrade %q; want 426 and Upgrade: websocket", resp.StatusCode, resp.Header.Get("Upgrade"))
	}
}

// TestWebSocketPings: an idle connection gets ping frames every keep-alive
// interval. The client is a bare TCP connection, so that nothing answers
// or hides the frames.
func TestWebSocketPings(t *testing.T) {
	srv := newServer(t, answer("hi"), &server.Options{KeepAlive: 20 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // a bound, not a synchronisation
	req := "GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: status %d", resp.StatusCode)
	}
	head := make([]byte, 2)
	if _, err := r.Read(head); err != nil {
		t.Fatalf("no frame from an idle connection: %v", err)
	}
	if head[0] != 0x89 { // FIN | opcode 9 (ping)
		t.Fatalf("first frame header %#x, want a ping (0x89)", head[0])
	}
}

// TestWebSocketMessageLimit: a message larger than MaxBodyBytes closes
// the connection with 1009 (message too big) instead of being read.
func TestWebSocketMessageLimit(t *testing.T) {
	srv := newServer(t, answer("hi"), &server.Options{MaxBodyBytes: 1024})
	ctx, c := dialSocket(t, srv.URL)
	big := `{"type":"response.create","model":"m","input":"` + strings.Repeat("x", 2048) + `"}`
	if err := c.Write(ctx, websocket.MessageText, []byte(big)); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Read(ctx)
	if status := websocket.CloseStatus(err); status != websocket.StatusMessageTooBig {
		t.Fatalf("read after an oversized message: %v, want close status 1009", err)
	}
}

// TestWebSocketUnknownEvent: an unknown client event type is an error
// event naming "type", and the connection goes on.
func TestWebSocketUnknownEvent(t *testing.T) {
	srv := newServer(t, answer("hi"), nil)
	ctx, c := dialSocket(t, srv.URL)
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.steer","input":[]}`))
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Type   string
		Status int
		Error  struct{ Param string }
	}
	json.Unmarshal(data, &ev)
	if ev.Type != "error" || ev.Status != http.StatusBadRequest || ev.Error.Param != "type" {
		t.Fatalf("got %s, want a 400 error event naming type", data)
	}
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"hi"}`))
	readCompleted(t, ctx, c)
}

// dialSocket opens a WebSocket to the server at url's /v1/responses, closed
// when the test ends; ctx bounds the test's reads and writes on it.
func dialSocket(t *testing.T, url string) (context.Context, *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return ctx, c
}

// readCompleted reads events from c up to response.completed and returns
// that event's data.
func readCompleted(t *testing.T, ctx context.Context, c *websocket.Conn) []byte {
	t.Helper()
	for range 100 {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct{ Type string }
		json.Unmarshal(data, &ev)
		if ev.Type == "response.completed" {
			return data
		}
	}
	t.Fatal("no response.completed in 100 events")
	return nil
}
