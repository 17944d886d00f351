package completions

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

// internalURL appears in upstream error bodies; it must never reach a
// client-facing message.
const internalURL = "http://10.20.30.40:8000/v1/completions"

const firstTokenChunk = "data: {\"choices\":[{\"index\":0,\"text\":\"<|channel|>final<|message|>a\",\"finish_reason\":null}]}\n\n"

func TestErrors(t *testing.T) {
	tests := []struct {
		name         string
		handler      func(w http.ResponseWriter, r *http.Request, attempt int)
		opts         func(o *Options)
		wantStatus   int   // 0: success
		wantAttempts int32 // requests the upstream saw
		wantDeltas   int   // deltas emitted (before the error, or in total)
		wantErrText  string
	}{{
		name: "429 retried, then reported as 429",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "60") // capped by RetryWaitMax
			http.Error(w, `{"error":{"message":"too many requests to `+internalURL+`"}}`, http.StatusTooManyRequests)
		},
		wantStatus: 429, wantAttempts: 3, wantErrText: "too many requests",
	}, {
		name: "500 retried, then 502",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			http.Error(w, `{"object":"error","message":"EngineCore died at `+internalURL+`"}`, 500)
		},
		wantStatus: 502, wantAttempts: 3, wantErrText: "EngineCore died",
	}, {
		name: "503 twice then success",
		handler: func(w http.ResponseWriter, _ *http.Request, attempt int) {
			if attempt <= 2 {
				http.Error(w, "loading model", http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, okStream)
		},
		wantAttempts: 3, wantDeltas: 3, // text, usage, finish
	}, {
		name: "retries disabled",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		},
		opts:       func(o *Options) { o.Retries = -1 },
		wantStatus: 502, wantAttempts: 1, wantErrText: "busy",
	}, {
		name: "400 is not retried",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			http.Error(w, `{"error":{"message":"maximum context length is 8192 tokens"}}`, http.StatusBadRequest)
		},
		wantStatus: 502, wantAttempts: 1, wantErrText: "maximum context length",
	}, {
		name: "garbage body with 200",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, "<html><body>Bad Gateway from "+internalURL+"</body></html>\n")
		},
		wantStatus: 502, wantAttempts: 1, wantErrText: "unexpected line",
	}, {
		name: "non-JSON data line",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, firstTokenChunk+"data: {not json\n\n")
		},
		wantStatus: 502, wantAttempts: 1, wantDeltas: 1, wantErrText: "decoding chunk",
	}, {
		name: "stream cut before [DONE]: deltas, then 502, no retry",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, firstTokenChunk)
		},
		wantStatus: 502, wantAttempts: 1, wantDeltas: 1, wantErrText: "unexpected EOF",
	}, {
		name: "connection dropped mid-chunk",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, firstTokenChunk)
			w.(http.Flusher).Flush()
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_, _ = io.WriteString(conn, "20\r\ndata: {\"choi")
				_ = conn.Close()
			}
		},
		wantStatus: 502, wantAttempts: 1, wantDeltas: 1,
	}, {
		name: "error object inside the stream",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, firstTokenChunk+"data: {\"error\": {\"message\": \"CUDA out of memory\"}}\n\ndata: [DONE]\n\n")
		},
		wantStatus: 502, wantAttempts: 1, wantDeltas: 1, wantErrText: "CUDA out of memory",
	}, {
		name: "llama.cpp error line",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, "error: {\"code\":500,\"message\":\"context shift disabled\"}\n\n")
		},
		wantStatus: 502, wantAttempts: 1, wantErrText: "context shift disabled",
	}, {
		name: "finish_reason abort",
		handler: func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\"<|channel|>final<|message|>a\",\"finish_reason\":\"abort\"}]}\n\ndata: [DONE]\n\n")
		},
		wantStatus: 502, wantAttempts: 1, wantDeltas: 1, wantErrText: "abort",
	}, {
		name: "first-byte timeout is 504",
		handler: func(w http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		},
		opts:       func(o *Options) { o.FirstByteTimeout = 50 * time.Millisecond },
		wantStatus: 504, wantAttempts: 1, wantErrText: "first-byte timeout",
	}}
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
			deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", opts), userReq("hi"))
			if got := attempts.Load(); got != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", got, tt.wantAttempts)
			}
			if len(deltas) != tt.wantDeltas {
				t.Errorf("deltas = %d (%v), want %d", len(deltas), summary(deltas), tt.wantDeltas)
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("err = %v, want success", err)
				}
				return
			}
			var merr *model.Error
			if !errors.As(err, &merr) {
				t.Fatalf("err = %v (%T), want *model.Error", err, err)
			}
			if merr.Status != tt.wantStatus {
				t.Errorf("status = %d, want %d (%v)", merr.Status, tt.wantStatus, err)
			}
			if strings.Contains(merr.Message, "10.20.30.40") || strings.Contains(merr.Message, srv.URL) {
				t.Errorf("client message leaks internals: %q", merr.Message)
			}
			if !strings.Contains(err.Error(), tt.wantErrText) {
				t.Errorf("err = %q, want it to mention %q", err, tt.wantErrText)
			}
		})
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
	if !errors.As(err, &merr) || merr.Status != http.StatusBadGateway || strings.Contains(merr.Message, addr) {
		t.Fatalf("err = %v, want a 502 *model.Error not naming the address", err)
	}
}

func TestDeadline504(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		t.Fatalf("err = %v, want a 504 wrapping DeadlineExceeded", err)
	}
}

// TestCancelAbortsUpstream: cancelling ctx mid-stream returns at once and
// the upstream sees its request end, which is how an engine stops.
func TestCancelAbortsUpstream(t *testing.T) {
	handlerDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, firstTokenChunk)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("handler: request context not cancelled")
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- New(srv.URL+"/v1", "", testOptions()).Stream(ctx, userReq("hi"), func(d model.Delta) error {
			if d.Kind == model.DeltaText {
				cancel() // the client left after the first token
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
		t.Fatal("upstream never saw the request end")
	}
}

func TestEmitErrorReturned(t *testing.T) {
	srv := sseServer(t, okStream)
	sentinel := errors.New("client write failed")
	err := New(srv.URL+"/v1", "", testOptions()).Stream(context.Background(), userReq("hi"), func(model.Delta) error { return sentinel })
	if err != sentinel {
		t.Fatalf("err = %v, want the emit error itself", err)
	}
}

// TestRenderErrorNotSent: a request that cannot be rendered is a 400 and
// never reaches the upstream.
func TestRenderErrorNotSent(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { attempts.Add(1) }))
	defer srv.Close()
	req := userReq("hi")
	req.Items[0].Role = "critic"
	_, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), req)
	var merr *model.Error
	if !errors.As(err, &merr) || merr.Status != http.StatusBadRequest || attempts.Load() != 0 {
		t.Fatalf("err = %v, attempts %d; want a 400 and no request", err, attempts.Load())
	}
}

func TestPathAndAuth(t *testing.T) {
	rec := &bodyRecorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	if _, err := collect(context.Background(), New(srv.URL+"/v1/", "sk-test", testOptions()), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if rec.paths[0] != "/v1/completions" || rec.auth[0] != "Bearer sk-test" {
		t.Fatalf("path %q auth %q", rec.paths[0], rec.auth[0])
	}
}
