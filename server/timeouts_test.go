package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/server"
)

// TestDrippingBodyIsCutOff sends the headers and one byte of a body,
// then nothing: the server must answer 408 once the body read timeout
// passes instead of holding the connection.
func TestDrippingBodyIsCutOff(t *testing.T) {
	srv := newServer(t, backendFunc(answerHi), &server.Options{BodyReadTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A bound on the wait, far past the timeout, so that a regression
	// fails rather than hangs.
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(conn, "POST /v1/responses HTTP/1.1\r\nHost: loom\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a dripping body: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", res.StatusCode)
	}
	if _, code := errorBody(t, res); code != "request_timeout" {
		t.Errorf("code %q", code)
	}
}

// TestLongStreamOutlivesWriteTimeout checks the write deadline is set per
// event: a stream whose events come further apart than the write timeout,
// and which lasts longer than the body read timeout, completes.
func TestLongStreamOutlivesWriteTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	b := backendFunc(func(ctx context.Context, _ *model.Request, emit func(model.Delta) error) error {
		for range 3 {
			if err := emit(model.Delta{Kind: model.DeltaText, Text: "tick "}); err != nil {
				return err
			}
			// The silence between events is what is under test: longer
			// than both timeouts.
			select {
			case <-time.After(3 * timeout):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	srv := newServer(t, b, &server.Options{WriteTimeout: timeout, BodyReadTimeout: timeout, KeepAlive: time.Hour})
	res := post(t, srv.URL, `{"model":"m","input":"x","stream":true}`, nil)
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("stream cut: %v\n%s", err, body)
	}
	if !strings.Contains(string(body), "response.completed") || strings.Count(string(body), "tick") < 3 {
		t.Errorf("stream did not complete:\n%s", body)
	}
}

// BenchmarkLongStream streams a response of 2000 text deltas over
// loopback, with the per-write deadline (the default) and without it, to
// measure what setting the deadline before each event costs.
func BenchmarkLongStream(b *testing.B) {
	const deltas = 2000
	backend := backendFunc(func(ctx context.Context, _ *model.Request, emit func(model.Delta) error) error {
		for range deltas {
			if err := emit(model.Delta{Kind: model.DeltaText, Text: "tok "}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, bc := range []struct {
		name    string
		timeout time.Duration
	}{{"deadline-per-write", 0}, {"no-deadline", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			srv := newServerB(b, backend, &server.Options{WriteTimeout: bc.timeout})
			body := `{"model":"m","input":"x","stream":true,"store":false}`
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				res, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if n == 0 {
					b.Fatal("empty stream")
				}
			}
			b.ReportMetric(float64(b.N*deltas)/b.Elapsed().Seconds(), "deltas/s")
		})
	}
}
