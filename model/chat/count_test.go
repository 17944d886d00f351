package chat

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/telemetry"
)

// TestTokenizeThroughTheClient: the tokenize call is a turn's request:
// retried after a 503, sent with the key and the request's trace, bounded
// by the whole-answer timeout, and its failures mapped as a turn's are (a
// final 429 is a 429, not a 502).
func TestTokenizeThroughTheClient(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tt := range []struct {
		name string
		// handler gets the attempt number, from 1.
		handler      func(w http.ResponseWriter, r *http.Request, attempt int)
		wantAttempts int32
		wantKind     string // "": the count 7
	}{
		{"503, then the count", func(w http.ResponseWriter, r *http.Request, attempt int) {
			if attempt == 1 {
				http.Error(w, "loading", http.StatusServiceUnavailable)
				return
			}
			if !strings.Contains(r.Header.Get("Traceparent"), traceID) || r.Header.Get("Authorization") != "Bearer sk-test" {
				http.Error(w, "no trace or key: "+r.Header.Get("Traceparent"), http.StatusBadRequest)
				return
			}
			io.WriteString(w, `{"count":7,"max_model_len":8192}`)
		}, 2, ""},
		{"429 every time", func(w http.ResponseWriter, _ *http.Request, _ int) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}, 3, responses.ERateLimited},
		{"no answer", func(w http.ResponseWriter, r *http.Request, _ int) {
			// Held until the client goes away (5 s: the bound of the
			// test, not a measure).
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, 1, responses.ETimeout},
		{"no count", func(w http.ResponseWriter, _ *http.Request, _ int) {
			io.WriteString(w, `{"tokens":[1,2]}`)
		}, 1, responses.EUpstream},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var attempts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				tt.handler(w, r, int(attempts.Add(1)))
			}))
			defer srv.Close()
			opts := testOptions()
			opts.TokenizeURL = srv.URL + "/tokenize"
			opts.WholeTimeout = 200 * time.Millisecond
			b := New(srv.URL+"/v1", "sk-test", opts)

			in := httptest.NewRequest(http.MethodPost, "/v1/responses/input_tokens", nil)
			in.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
			ctx, span := telemetry.StartRequest(in, telemetry.Tracer(nil, "test"), "POST")
			defer span.End()
			got, err := b.CountInput(ctx, userReq("hi"))
			if n := attempts.Load(); n != tt.wantAttempts {
				t.Errorf("the endpoint saw %d requests, want %d", n, tt.wantAttempts)
			}
			if tt.wantKind == "" {
				if err != nil || got != (model.InputCount{Tokens: 7}) {
					t.Fatalf("CountInput = %+v, %v; want 7 tokens, exact", got, err)
				}
				return
			}
			var merr *responses.APIError
			if !errors.As(err, &merr) || merr.Kind != tt.wantKind {
				t.Fatalf("CountInput err = %v, want a *responses.APIError of kind %s", err, tt.wantKind)
			}
		})
	}
}
