package mockllm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
)

func TestScriptedHTTPErrors(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		stream   bool
		status   int
		wantBody string
	}{
		{"429", "#fail 429", true, 429,
			`{"error":{"message":"Too Many Requests (scripted by mockllm)","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{"500 with message", "#fail 500 engine on fire", false, 500,
			`{"error":{"message":"engine on fire","type":"server_error","param":null,"code":null}}`},
		{"400", "#fail 400", false, 400,
			`{"error":{"message":"Bad Request (scripted by mockllm)","type":"invalid_request_error","param":null,"code":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, hs := start(t, nil)
			resp := post(testContext(t), t, hs, chatBody(tt.stream, tt.script))
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || string(body) != tt.wantBody {
				t.Errorf("got %d %s\nwant %d %s", resp.StatusCode, body, tt.status, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if st := s.Stats(); st != (Stats{Started: 1, Failed: 1}) {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestFlakyFailsThenSucceeds(t *testing.T) {
	s, hs := start(t, nil)
	ctx := testContext(t)
	body := chatBody(false, "#flaky 2 503\n#say finally")
	for i, want := range []int{503, 503, 200, 200} {
		resp := post(ctx, t, hs, body)
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("attempt %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	// Another body has its own count.
	resp := post(ctx, t, hs, chatBody(true, "#flaky 2 503\n#say other"))
	if resp.StatusCode != 503 {
		t.Fatalf("other body: status %d", resp.StatusCode)
	}
	s.Reset()
	resp = post(ctx, t, hs, body)
	if resp.StatusCode != 503 {
		t.Fatalf("after Reset: status %d, want the count restarted", resp.StatusCode)
	}
}

func TestCutDropsConnection(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		events int
	}{
		{"mid stream", "#say abcdefghijkl\n#cut 2", 2},
		{"before done", "#say ab\n#cut 99", 3}, // role, "ab", finish
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, hs := start(t, nil)
			resp := post(testContext(t), t, hs, chatBody(true, tt.script))
			r := newSSEReader(resp.Body)
			var events []string
			var err error
			for {
				var data string
				if data, err = r.next(); err != nil {
					break
				}
				if data == "[DONE]" {
					t.Fatal("got [DONE] from a cut stream")
				}
				events = append(events, data)
			}
			if len(events) != tt.events {
				t.Errorf("got %d events before the cut, want %d", len(events), tt.events)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("read error = %v, want unexpected EOF (an aborted chunked body)", err)
			}
			if err := s.WaitDone(testContext(t), 1); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.Failed != 1 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		_, hs := start(t, nil)
		raw, _ := json.Marshal(chatBody(false, "#cut 0"))
		resp, err := hs.Client().Post(hs.URL+"/v1/chat/completions", "application/json", bytesReader(raw))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got a response (%d), want a dropped connection", resp.StatusCode)
		}
	})
}

func TestStallCancelledByClient(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		stream bool
		events int // events to read before cancelling
	}{
		{"before first byte", "#stall", true, 0},
		{"json", "#stall 3", false, 0},
		{"mid stream", "#say hello world\n#stall 2", true, 2},
		{"between chunks", "#tokens 100\n#latency 20ms", true, 3},
		{"in first byte delay", "#delay 1h", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, hs := start(t, nil)
			ctx := testContext(t)
			reqCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				// The round trip itself blocks when nothing is sent yet.
				raw, _ := json.Marshal(chatBody(tt.stream, tt.script))
				req, _ := http.NewRequestWithContext(reqCtx, http.MethodPost, hs.URL+"/v1/chat/completions", bytesReader(raw))
				resp, err := hs.Client().Do(req)
				if err != nil {
					done <- err
					return
				}
				defer resp.Body.Close()
				r := newSSEReader(resp.Body)
				for i := 0; i < tt.events; i++ {
					if _, err := r.next(); err != nil {
						done <- err
						return
					}
				}
				done <- nil
				_, err = io.ReadAll(resp.Body)
				_ = err // ends with the cancellation
			}()
			if tt.events > 0 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			} else if err := s.WaitStarted(ctx, 1); err != nil {
				t.Fatal(err)
			}
			// Nothing has ended yet; that the request then ends as
			// cancelled, not completed, is the stats check below.
			if st := s.Stats(); st.Completed+st.Cancelled+st.Failed != 0 {
				t.Fatalf("request ended before the client left: %+v", st)
			}
			cancel()
			if err := s.WaitCancelled(ctx, 1); err != nil {
				t.Fatalf("cancellation not detected: %v (stats %+v)", err, s.Stats())
			}
			if st := s.Stats(); st != (Stats{Started: 1, Cancelled: 1}) {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestCloseEndsStall(t *testing.T) {
	s, hs := start(t, nil)
	ctx := testContext(t)
	errc := make(chan error, 1)
	go func() {
		raw, _ := json.Marshal(chatBody(true, "#stall"))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", bytesReader(raw))
		resp, err := hs.Client().Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	if err := s.WaitStarted(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := <-errc; err == nil {
		t.Error("client saw a clean answer, want a dropped connection")
	}
	if st := s.Stats(); st.Failed != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestGarbage(t *testing.T) {
	for _, stream := range []bool{false, true} {
		_, hs := start(t, nil)
		resp := post(testContext(t), t, hs, chatBody(stream, "#garbage"))
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream=%v: status %d", stream, resp.StatusCode)
		}
		if json.Valid(body) {
			t.Errorf("stream=%v: body is valid JSON: %s", stream, body)
		}
		if stream {
			if string(body) != "data: this is not json\n\n" {
				t.Errorf("stream body = %q", body)
			}
			continue
		}
		if json.Unmarshal(body, new(chatCompletion)) == nil {
			t.Errorf("garbage decoded as a completion")
		}
	}
}
