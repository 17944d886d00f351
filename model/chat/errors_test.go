package chat

import (
	"context"
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
)

const okStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

// internalURL appears in upstream error bodies; it must never reach a
// client-facing message.
const internalURL = "http://10.20.30.40:8000/v1/chat/completions"

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		// handler gets the attempt number, from 1.
		handler      func(w http.ResponseWriter, r *http.Request, attempt int)
		opts         func(o *Options)
		wantStatus   int    // 0: success
		wantAttempts int32  // requests the upstream saw
		wantDeltas   int    // deltas emitted before the error (or in total)
		wantErrText  string // in the Err chain (for logs)
	}{
		{
			name: "429 retried, then reported as 429",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Retry-After", "60") // capped by RetryWaitMax
				http.Error(w, `{"error":{"message":"too many requests to `+internalURL+`","type":"RateLimitError","code":429}}`, http.StatusTooManyRequests)
			},
			wantStatus: 429, wantAttempts: 3, wantErrText: "too many requests",
		},
		{
			name: "500 retried, then 502",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, `{"object":"error","message":"EngineCore died at `+internalURL+`","type":"InternalServerError","param":null,"code":500}`, 500)
			},
			wantStatus: 502, wantAttempts: 3, wantErrText: "EngineCore died",
		},
		{
			name: "503 twice then success",
			handler: func(w http.ResponseWriter, _ *http.Request, attempt int) {
				if attempt <= 2 {
					http.Error(w, "loading model", http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, okStream)
			},
			wantStatus: 0, wantAttempts: 3, wantDeltas: 2,
		},
		{
			name: "retries disabled",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, "busy", http.StatusServiceUnavailable)
			},
			opts:       func(o *Options) { o.Retries = -1 },
			wantStatus: 502, wantAttempts: 1, wantErrText: "busy",
		},
		{
			name: "400 is not retried, 502 with a safe message",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (`+internalURL+`)","type":"BadRequestError","param":null,"code":400}}`)
			},
			wantStatus: 502, wantAttempts: 1, wantErrText: "maximum context length",
		},
		{
			name: "404 unknown model",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				http.Error(w, `{"error":{"message":"The model `+"`nope`"+` does not exist.","type":"NotFoundError","param":"model","code":404}}`, http.StatusNotFound)
			},
			wantStatus: 502, wantAttempts: 1, wantErrText: "does not exist",
		},
		{
			name: "garbage body with 200",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = io.WriteString(w, "<html><body>Bad Gateway from "+internalURL+"</body></html>\n")
			},
			wantStatus: 502, wantAttempts: 1, wantErrText: "unexpected line",
		},
		{
			name: "non-JSON data line",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json\n\n")
			},
			wantStatus: 502, wantAttempts: 1, wantDeltas: 1, wantErrText: "decoding chunk",
		},
		{
			name: "stream ends without [DONE]: deltas, then 502, no retry",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n"+
					"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n")
			},
			wantStatus: 502, wantAttempts: 1, wantDeltas: 2, wantErrText: "unexpected EOF",
		},
		{
			name: "connection cut mid-stream",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n")
				w.(http.Flusher).Flush()
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					// Half a chunk, then the connection drops.
					_, _ = io.WriteString(conn, "20\r\ndata: {\"choi")
					_ = conn.Close()
				}
			},
			wantStatus: 502, wantAttempts: 1, wantDeltas: 1,
		},
		{
			name: "vLLM error object inside the stream",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"+
					"data: {\"error\": {\"message\": \"CUDA out of memory\", \"type\": \"InternalServerError\", \"param\": null, \"code\": 500}}\n\n"+
					"data: [DONE]\n\n")
			},
			wantStatus: 502, wantAttempts: 1, wantDeltas: 1, wantErrText: "CUDA out of memory",
		},
		{
			name: "llama.cpp error line inside the stream",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, "error: {\"code\":500,\"message\":\"failed to parse tool call\",\"type\":\"server_error\"}\n\n")
			},
			wantStatus: 502, wantAttempts: 1, wantErrText: "failed to parse tool call",
		},
		{
			name: "finish_reason abort",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"abort\"}]}\n\ndata: [DONE]\n\n")
			},
			wantStatus: 502, wantAttempts: 1, wantDeltas: 1, wantErrText: "abort",
		},
		{
			name: "slow first byte: 504",
			handler: func(w http.ResponseWriter, r *http.Request, _ int) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			opts:       func(o *Options) { o.FirstByteTimeout = 100 * time.Millisecond },
			wantStatus: 504, wantAttempts: 1, wantErrText: "first-byte timeout",
		},
		{
			name: "headers at once, body slow: still 504",
			handler: func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			opts:       func(o *Options) { o.FirstByteTimeout = 100 * time.Millisecond },
			wantStatus: 504, wantAttempts: 1, wantErrText: "first-byte timeout",
		},
		{
			name: "first byte in time, slow tokens after it: fine",
			handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
				_, _ = io.WriteString(w, ": ping\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(400 * time.Millisecond) // twice the first-byte timeout
				_, _ = io.WriteString(w, okStream)
			},
			opts:       func(o *Options) { o.FirstByteTimeout = 200 * time.Millisecond },
			wantStatus: 0, wantAttempts: 1, wantDeltas: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var attempts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				tt.handler(w, r, int(attempts.Add(1)))
			}))
			defer srv.Close()
			opts := testOptions()
			if tt.opts != nil {
				tt.opts(opts)
			}
			b := New(srv.URL+"/v1", "", opts)

			start := time.Now()
			deltas, err := collect(context.Background(), b, userReq("hi"))
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("took %v", elapsed)
			}
			if got := attempts.Load(); got != tt.wantAttempts {
				t.Errorf("upstream saw %d requests, want %d", got, tt.wantAttempts)
			}
			if len(deltas) != tt.wantDeltas {
				t.Errorf("emitted %d deltas (%+v), want %d", len(deltas), deltas, tt.wantDeltas)
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				return
			}
			var merr *model.Error
			if !errors.As(err, &merr) {
				t.Fatalf("err = %v (%T), want *model.Error", err, err)
			}
			if merr.Status != tt.wantStatus {
				t.Errorf("status %d, want %d (%v)", merr.Status, tt.wantStatus, err)
			}
			if strings.Contains(merr.Message, "10.20.30.40") || strings.Contains(merr.Message, srv.Listener.Addr().String()) ||
				strings.Contains(merr.Message, "{") {
				t.Errorf("client message leaks upstream details: %q", merr.Message)
			}
			if merr.Message == "" {
				t.Error("empty client message")
			}
			if tt.wantErrText != "" && (merr.Err == nil || !strings.Contains(merr.Err.Error(), tt.wantErrText)) {
				t.Errorf("Err = %v, want it to mention %q", merr.Err, tt.wantErrText)
			}
		})
	}
}

// TestUpstreamErrorDetails checks what callers can read from Err.
func TestUpstreamErrorDetails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"context too long","code":400}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	_, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
	var uerr *UpstreamError
	if !errors.As(err, &uerr) || uerr.StatusCode != 400 || uerr.Message != "context too long" {
		t.Fatalf("err = %v, want an *UpstreamError{400, context too long}", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	_, err = collect(context.Background(), New("http://"+addr+"/v1", "", testOptions()), userReq("hi"))
	var merr *model.Error
	if !errors.As(err, &merr) || merr.Status != http.StatusBadGateway {
		t.Fatalf("err = %v, want a 502 *model.Error", err)
	}
	if strings.Contains(merr.Message, addr) {
		t.Errorf("message leaks the address: %q", merr.Message)
	}
}

// TestConnectionErrorRetried: the first connection is dropped before any
// response; the retry succeeds.
func TestConnectionErrorRetried(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		_, _ = io.WriteString(w, okStream)
	}))
	defer srv.Close()
	deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
	if err != nil || len(deltas) != 2 || attempts.Load() != 2 {
		t.Fatalf("err=%v deltas=%d attempts=%d, want success after 2 attempts", err, len(deltas), attempts.Load())
	}
}

func TestDeadline504(t *testing.T) {
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
	_, err := collect(ctx, New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
	var merr *model.Error
	if !errors.As(err, &merr) || merr.Status != http.StatusGatewayTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a 504 *model.Error wrapping DeadlineExceeded", err)
	}
}

// TestCancelAbortsUpstream: cancelling ctx mid-stream returns at once and
// the upstream handler sees its request context end (the connection was
// closed), which is how an engine learns to stop generating.
func TestCancelAbortsUpstream(t *testing.T) {
	handlerDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("handler: request context not cancelled")
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	b := New(srv.URL+"/v1", "", testOptions())
	errc := make(chan error, 1)
	go func() {
		errc <- b.Stream(ctx, userReq("hi"), func(d model.Delta) error {
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

// TestEmitErrorReturned: emit's error comes back unchanged and the
// upstream request is dropped.
func TestEmitErrorReturned(t *testing.T) {
	handlerDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	sentinel := errors.New("client write failed")
	err := New(srv.URL+"/v1", "", testOptions()).Stream(context.Background(), userReq("hi"), func(model.Delta) error { return sentinel })
	if err != sentinel {
		t.Fatalf("err = %v, want the emit error itself", err)
	}
	select {
	case <-handlerDone:
	case <-time.After(3 * time.Second):
		t.Fatal("upstream handler never saw the request end")
	}
}

// TestRequestErrorBeforeSending: a request that cannot be translated
// fails with a 400 and never reaches the upstream.
func TestRequestErrorBeforeSending(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { attempts.Add(1) }))
	defer srv.Close()
	req := userReq("hi")
	req.Items[0].Role = "critic"
	_, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), req)
	var merr *model.Error
	if !errors.As(err, &merr) || merr.Status != http.StatusBadRequest || attempts.Load() != 0 {
		t.Fatalf("err = %v, attempts %d; want a 400 and no request", err, attempts.Load())
	}
}
