package upstreamtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// internalURL appears in upstream error bodies; it must never reach a
// client-facing message.
const internalURL = "http://10.20.30.40:8000/v1/chat/completions"

// Run runs every shared case against the backend w describes, each as a
// subtest.
func Run(t *testing.T, w Wire) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Wire)
	}{
		{"Errors", testErrors},
		{"UpstreamErrorDetails", testUpstreamErrorDetails},
		{"ConnectionRefused", testConnectionRefused},
		{"ConnectionErrorRetried", testConnectionErrorRetried},
		{"RetrySendsWholeBody", testRetrySendsWholeBody},
		{"Deadline504", testDeadline504},
		{"CancelAbortsUpstream", testCancelAbortsUpstream},
		{"EmitErrorReturned", testEmitErrorReturned},
		{"RequestErrorNotSent", testRequestErrorNotSent},
		{"PathAndAuth", testPathAndAuth},
		{"WholeMatchesStream", testWholeMatchesStream},
		{"WholeErrorObject", testWholeErrorObject},
		{"PauseWhenUpstreamWaits", testPauseWhenUpstreamWaits},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, w) })
	}
	for _, c := range fleetCases() {
		t.Run(c.name, func(t *testing.T) { c.test(t, w) })
	}
}

type errorCase struct {
	name string
	// handler gets the attempt number, from 1.
	handler      func(w http.ResponseWriter, r *http.Request, attempt int)
	opts         Options
	wantKind     string // "": success
	wantAttempts int32  // requests the upstream saw
	wantDeltas   int    // deltas emitted before the error (or in total)
	wantErrText  string // in the Err chain (for logs)
	// wantMessage and wantCode, when set, are the client's message and
	// code: an engine's reason a client is shown, cleaned.
	wantMessage, wantCode string
}

// firstThenHold serves an upstream that streams wire.First and then holds
// the stream open until its client goes away, as an engine still
// generating would; done is closed when the handler returns. A client that
// never goes away is an error after 10 s (the bound of a test).
func firstThenHold(t *testing.T, wire Wire) (srv *httptest.Server, done <-chan struct{}) {
	handlerDone := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, wire.First)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("upstream handler: the request was never dropped")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, handlerDone
}

// hold keeps a request waiting until its client goes away (5 s at most:
// the bound of a test, not a measure).
func hold(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

// answer is a handler that answers body, whatever the attempt.
func answer(body string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) { _, _ = io.WriteString(w, body) }
}

func errorCases(wire Wire) []errorCase {
	return []errorCase{
		{
			name: "429 retried, then reported as 429",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Retry-After", "60") // capped by RetryWaitMax
				http.Error(w, `{"error":{"message":"too many requests to `+internalURL+`","type":"RateLimitError","code":429}}`, http.StatusTooManyRequests)
			},
			wantKind: responses.ERateLimited, wantAttempts: 3, wantErrText: "too many requests",
		},
		{
			name: "500 retried, then 502",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, `{"object":"error","message":"EngineCore died at `+internalURL+`","type":"InternalServerError","param":null,"code":500}`, 500)
			},
			wantKind: responses.EUpstream, wantAttempts: 3, wantErrText: "EngineCore died",
		},
		{
			name: "503 twice then success",
			handler: func(w http.ResponseWriter, _ *http.Request, attempt int) {
				if attempt <= 2 {
					http.Error(w, "loading model", http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, wire.OK)
			},
			wantKind: "", wantAttempts: 3, wantDeltas: wire.OKDeltas,
		},
		{
			name: "retries disabled",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, "busy", http.StatusServiceUnavailable)
			},
			opts:     Options{Retries: -1},
			wantKind: responses.EUpstream, wantAttempts: 1, wantErrText: "busy",
		},
		{
			name: "400 is not retried, a 400 with the engine's reason, cleaned",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (`+internalURL+`)","type":"BadRequestError","param":null,"code":400}}`)
			},
			wantKind: responses.EInvalid, wantAttempts: 1, wantErrText: "maximum context length",
			wantMessage: "the upstream model server rejected the request: This model's maximum context length is 8192 tokens. However, you requested 9000 tokens ([url])",
			wantCode:    upstream.CodeContextLength,
		},
		{
			name: "422 in older vLLM's shape: a 400 with the reason, hosts and control characters removed",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, `{"object":"error","message":"temperature must be in [0, 2], got 7\n\tat worker 10.20.30.40:8000 (vllm-0.internal:8000, [fd00::7]:8000)\u0007","type":"BadRequestError","code":422}`, http.StatusUnprocessableEntity)
			},
			wantKind: responses.EInvalid, wantAttempts: 1, wantErrText: "temperature must be",
			wantMessage: "the upstream model server rejected the request: temperature must be in [0, 2], got 7 at worker [host] ([host], [host])",
			wantCode:    upstream.CodeInvalidPrompt,
		},
		{
			name: "400 with a long reason: capped",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, `{"error":{"message":"bad value: `+strings.Repeat("é", 4000)+`"}}`, http.StatusBadRequest)
			},
			wantKind: responses.EInvalid, wantAttempts: 1, wantErrText: "bad value",
			wantMessage: "the upstream model server rejected the request: bad value: " + strings.Repeat("é", (upstream.MaxClientReason-len("the upstream model server rejected the request: bad value: ")-len("…"))/2) + "…",
			wantCode:    upstream.CodeInvalidPrompt,
		},
		{
			name: "404 unknown model",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, `{"error":{"message":"The model `+"`nope`"+` does not exist.","type":"NotFoundError","param":"model","code":404}}`, http.StatusNotFound)
			},
			wantKind: responses.EUpstream, wantAttempts: 1, wantErrText: "does not exist",
		},
		{
			name: "garbage body with 200",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = io.WriteString(w, "<html><body>Bad Gateway from "+internalURL+"</body></html>\n")
			},
			wantKind: responses.EUpstream, wantAttempts: 1, wantErrText: "unexpected line",
		},
		{
			name: "non-JSON data line",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, wire.First+"data: {not json\n\n")
			},
			wantKind: responses.EUpstream, wantAttempts: 1, wantDeltas: 1, wantErrText: "decoding chunk",
		},
		{
			name: "stream ends without [DONE]: deltas, then 502, no retry",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, wire.Unfinished)
			},
			wantKind: responses.EUpstream, wantAttempts: 1, wantDeltas: wire.UnfinishedDeltas, wantErrText: "unexpected EOF",
		},
		{
			name: "connection cut mid-stream",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, wire.First)
				w.(http.Flusher).Flush()
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					// Half a chunk, then the connection drops.
					_, _ = io.WriteString(conn, "20\r\ndata: {\"choi")
					_ = conn.Close()
				}
			},
			wantKind: responses.EUpstream, wantAttempts: 1, wantDeltas: 1,
		},
		{
			name:     "vLLM error object inside the stream",
			handler:  answer(wire.First + `data: {"error": {"message": "CUDA out of memory", "type": "InternalServerError", "param": null, "code": 500}}` + "\n\ndata: [DONE]\n\n"),
			wantKind: responses.EUpstream, wantAttempts: 1, wantDeltas: 1, wantErrText: "CUDA out of memory",
		},
		{
			name:     "older vLLM error object inside the stream",
			handler:  answer(wire.First + `data: {"object": "error", "message": "engine dead", "type": "InternalServerError", "code": 500}` + "\n\ndata: [DONE]\n\n"),
			wantKind: responses.EUpstream, wantAttempts: 1, wantDeltas: 1, wantErrText: "engine dead",
		},
		{
			name: "llama.cpp error line inside the stream",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, "error: {\"code\":500,\"message\":\"failed to parse tool call\",\"type\":\"server_error\"}\n\n")
			},
			wantKind: responses.EUpstream, wantAttempts: 1, wantErrText: "failed to parse tool call",
		},
		{
			name:     "finish_reason abort",
			handler:  answer(wire.Finished("abort")),
			wantKind: responses.EUpstream, wantAttempts: 1, wantDeltas: 1, wantErrText: "abort",
		},
		{
			name:     "finish_reason error",
			handler:  answer(wire.Finished("error")),
			wantKind: responses.EUpstream, wantAttempts: 1, wantDeltas: 1, wantErrText: `reason "error"`,
		},
		{
			name:     "slow first byte: 504",
			handler:  func(w http.ResponseWriter, r *http.Request, _ int) { hold(r) },
			opts:     Options{FirstByteTimeout: 100 * time.Millisecond},
			wantKind: responses.ETimeout, wantAttempts: 1, wantErrText: "first-byte timeout",
		},
		{
			name: "headers at once, body slow: still 504",
			handler: func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				hold(r)
			},
			opts:     Options{FirstByteTimeout: 100 * time.Millisecond},
			wantKind: responses.ETimeout, wantAttempts: 1, wantErrText: "first-byte timeout",
		},
		{
			name: "first byte in time, slow tokens after it: fine",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, ": ping\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(400 * time.Millisecond) // twice the first-byte timeout
				_, _ = io.WriteString(w, wire.OK)
			},
			opts:     Options{FirstByteTimeout: 200 * time.Millisecond},
			wantKind: "", wantAttempts: 1, wantDeltas: wire.OKDeltas,
		},
	}
}

func testErrors(t *testing.T, wire Wire) {
	for _, tt := range errorCases(wire) {
		t.Run(tt.name, func(t *testing.T) {
			var attempts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				tt.handler(w, r, int(attempts.Add(1)))
			}))
			defer srv.Close()
			b := wire.New(srv.URL+"/v1", "", tt.opts)

			start := time.Now()
			deltas, err := Collect(context.Background(), b, UserReq("hi"))
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("took %v", elapsed)
			}
			if got := attempts.Load(); got != tt.wantAttempts {
				t.Errorf("upstream saw %d requests, want %d", got, tt.wantAttempts)
			}
			if len(deltas) != tt.wantDeltas {
				t.Errorf("emitted %d deltas (%+v), want %d", len(deltas), deltas, tt.wantDeltas)
			}
			if tt.wantKind == "" {
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				return
			}
			var merr *responses.APIError
			if !errors.As(err, &merr) {
				t.Fatalf("err = %v (%T), want *responses.APIError", err, err)
			}
			if merr.Kind != tt.wantKind {
				t.Errorf("kind %s, want %s (%v)", merr.Kind, tt.wantKind, err)
			}
			if strings.Contains(merr.Message, "10.20.30.40") || strings.Contains(merr.Message, srv.Listener.Addr().String()) ||
				strings.Contains(merr.Message, "{") || strings.Contains(merr.Message, "internal") || len(merr.Message) > upstream.MaxClientReason {
				t.Errorf("client message leaks upstream details: %q", merr.Message)
			}
			if tt.wantMessage != "" && (merr.Message != tt.wantMessage || merr.Code != tt.wantCode) {
				t.Errorf("client message %q code %q, want %q %q", merr.Message, merr.Code, tt.wantMessage, tt.wantCode)
			}
			if merr.Message == "" {
				t.Error("empty client message")
			}
			if tt.wantErrText != "" && (merr.Cause == nil || !strings.Contains(merr.Cause.Error(), tt.wantErrText)) {
				t.Errorf("Err = %v, want it to mention %q", merr.Cause, tt.wantErrText)
			}
		})
	}
}

// testUpstreamErrorDetails checks what callers can read from Err.
func testUpstreamErrorDetails(t *testing.T, wire Wire) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"context too long","code":400}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	_, err := Collect(context.Background(), wire.New(srv.URL+"/v1", "", Options{}), UserReq("hi"))
	var uerr *upstream.UpstreamError
	if !errors.As(err, &uerr) || uerr.StatusCode != 400 || uerr.Message != "context too long" {
		t.Fatalf("err = %v, want an *UpstreamError{400, context too long}", err)
	}
}

func testConnectionRefused(t *testing.T, wire Wire) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	_, err = Collect(context.Background(), wire.New("http://"+addr+"/v1", "", Options{}), UserReq("hi"))
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.EUpstream {
		t.Fatalf("err = %v, want a 502 *responses.APIError", err)
	}
	if strings.Contains(merr.Message, addr) {
		t.Errorf("message leaks the address: %q", merr.Message)
	}
}

// testConnectionErrorRetried: the first connection is dropped before any
// response; the retry succeeds.
func testConnectionErrorRetried(t *testing.T, wire Wire) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		_, _ = io.WriteString(w, wire.OK)
	}))
	defer srv.Close()
	deltas, err := Collect(context.Background(), wire.New(srv.URL+"/v1", "", Options{}), UserReq("hi"))
	if err != nil || len(deltas) != wire.OKDeltas || attempts.Load() != 2 {
		t.Fatalf("err=%v deltas=%d attempts=%d, want success after 2 attempts", err, len(deltas), attempts.Load())
	}
}

// testRetrySendsWholeBody: the first attempt is refused before its body
// is read, the second after; the third must carry the same whole body.
func testRetrySendsWholeBody(t *testing.T, wire Wire) {
	var attempts atomic.Int32
	bodies := make(chan []byte, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch attempts.Add(1) {
		case 1:
			http.Error(w, "loading", http.StatusServiceUnavailable)
		case 2:
			b, _ := io.ReadAll(r.Body)
			bodies <- b
			http.Error(w, "loading", http.StatusServiceUnavailable)
		default:
			b, _ := io.ReadAll(r.Body)
			bodies <- b
			_, _ = io.WriteString(w, wire.OK)
		}
	}))
	defer srv.Close()
	deltas, err := Collect(context.Background(), wire.New(srv.URL+"/v1", "", Options{}), UserReq("hi"))
	if err != nil || len(deltas) != wire.OKDeltas || attempts.Load() != 3 {
		t.Fatalf("err=%v deltas=%d attempts=%d, want success after 3 attempts", err, len(deltas), attempts.Load())
	}
	second, third := <-bodies, <-bodies
	if !json.Valid(third) || !bytes.Equal(second, third) {
		t.Errorf("the retry sent another body:\n%s\nthen\n%s", second, third)
	}
}

func testDeadline504(t *testing.T, wire Wire) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Collect(ctx, wire.New(srv.URL+"/v1", "", Options{}), UserReq("hi"))
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.ETimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a 504 *responses.APIError wrapping DeadlineExceeded", err)
	}
}

// testCancelAbortsUpstream: cancelling ctx mid-stream returns at once and
// the upstream handler sees its request context end (the connection was
// closed), which is how an engine learns to stop generating.
func testCancelAbortsUpstream(t *testing.T, wire Wire) {
	srv, handlerDone := firstThenHold(t, wire)
	ctx, cancel := context.WithCancel(context.Background())
	b := wire.New(srv.URL+"/v1", "", Options{})
	errc := make(chan error, 1)
	go func() {
		errc <- b.Stream(ctx, UserReq("hi"), func(d model.Delta) error {
			if d.Kind == model.DeltaText {
				cancel() // the client went away after the first token
			}
			return nil
		})
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Stream err = %v, want context.Canceled", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Stream did not return after cancel")
	}
	select {
	case <-handlerDone:
	case <-time.After(3 * time.Second):
		t.Fatal("upstream handler never saw the request end")
	}
}

// testEmitErrorReturned: emit's error comes back unchanged, and an
// upstream request still streaming is dropped.
func testEmitErrorReturned(t *testing.T, wire Wire) {
	sentinel := errors.New("client write failed")
	failEmit := func(model.Delta) error { return sentinel }

	t.Run("whole turn sent", func(t *testing.T) {
		srv := SSEServer(t, wire.OK)
		err := wire.New(srv.URL+"/v1", "", Options{}).Stream(context.Background(), UserReq("hi"), failEmit)
		if err != sentinel {
			t.Fatalf("err = %v, want the emit error itself", err)
		}
	})
	t.Run("upstream still streaming", func(t *testing.T) {
		srv, handlerDone := firstThenHold(t, wire)
		err := wire.New(srv.URL+"/v1", "", Options{}).Stream(context.Background(), UserReq("hi"), failEmit)
		if err != sentinel {
			t.Fatalf("err = %v, want the emit error itself", err)
		}
		select {
		case <-handlerDone:
		case <-time.After(3 * time.Second):
			t.Fatal("upstream handler never saw the request end")
		}
	})
}

// testRequestErrorNotSent: a request that cannot be translated fails with
// a 400 and never reaches the upstream.
func testRequestErrorNotSent(t *testing.T, wire Wire) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { attempts.Add(1) }))
	defer srv.Close()
	req := UserReq("hi")
	req.Items[0].Role = "critic"
	_, err := Collect(context.Background(), wire.New(srv.URL+"/v1", "", Options{}), req)
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.EInvalid || attempts.Load() != 0 {
		t.Fatalf("err = %v, attempts %d; want a 400 and no request", err, attempts.Load())
	}
}

// testPathAndAuth checks the endpoint path, with or without a trailing
// slash on the base URL, and the auth header.
func testPathAndAuth(t *testing.T, wire Wire) {
	rec := &Recorder{Stream: wire.OK}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	for _, tc := range []struct{ base, key, wantAuth string }{
		{srv.URL + "/v1", "sk-test", "Bearer sk-test"},
		{srv.URL + "/v1/", "", ""},
		{srv.URL + "/v1/", "sk-test", "Bearer sk-test"},
	} {
		if _, err := Collect(context.Background(), wire.New(tc.base, tc.key, Options{}), UserReq("hi")); err != nil {
			t.Fatal(err)
		}
		reqs := rec.Requests()
		got := reqs[len(reqs)-1]
		if got.Path != wire.Path {
			t.Errorf("base %q: path %q, want %s", tc.base, got.Path, wire.Path)
		}
		if got.Auth != tc.wantAuth {
			t.Errorf("base %q: Authorization %q, want %q", tc.base, got.Auth, tc.wantAuth)
		}
	}
}
