package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/server"
)

// rawRequest sends one request line as written, on a connection of its
// own, and returns the answer: no client cleans or follows anything.
func rawRequest(t *testing.T, addr, method, target string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, method+" "+target+" HTTP/1.1\r\nHost: loom\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// Every path the API does not serve, however it is written, answers the
// API's JSON error shape: never net/http's HTML redirect to a cleaned
// path, nor its plain-text 404. The health routes stay plain text.
func TestEveryPathAnswersTheErrorShape(t *testing.T) {
	srv := newServer(t, backendFunc(answerHi), &server.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		method, target string
		status         int
		code, allow    string
	}{
		{"GET", "/", 404, "unknown_route", ""},
		{"GET", "/v1", 404, "unknown_route", ""},
		{"GET", "/v1/", 404, "unknown_route", ""},
		{"GET", "/nothing", 404, "unknown_route", ""},
		{"GET", "/v1/responses//input_items", 404, "unknown_route", ""},
		{"GET", "//v1/responses", 404, "unknown_route", ""},
		{"POST", "//v1/responses", 404, "unknown_route", ""},
		{"GET", "/v1/./models", 404, "unknown_route", ""},
		{"GET", "/v1/models/..", 404, "unknown_route", ""},
		{"GET", "/v1/../healthz", 404, "unknown_route", ""},
		{"GET", "/v1/conversations//items", 404, "unknown_route", ""},
		{"DELETE", "/v1/responses/", 404, "unknown_route", ""},
		{"POST", "/healthz", 405, "method_not_allowed", "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			res := rawRequest(t, addr, tt.method, tt.target)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || res.Header.Get("Location") != "" {
				t.Fatalf("status %d, Content-Type %q, Location %q, want %d JSON:\n%s", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Location"), tt.status, body)
			}
			var e struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || len(e.Error) != 4 || e.Error["code"] != tt.code || e.Error["type"] == nil || e.Error["message"] == "" {
				t.Errorf("body is not the error shape with code %s: %s", tt.code, body)
			}
			if got := res.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		res := rawRequest(t, addr, "GET", path)
		if body, _ := io.ReadAll(res.Body); res.StatusCode != 200 || string(body) != "ok\n" {
			t.Errorf("GET %s: %d %q, want 200 ok", path, res.StatusCode, body)
		}
	}
}
