package mockllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fixedNow makes "created" predictable so chunks can be compared exactly.
var fixedNow = func() time.Time { return time.Unix(1700000000, 0) }

// start serves a mock on loopback and tears it down after the test; the
// mock is closed first so stalled handlers cannot hang the shutdown.
func start(t testing.TB, opts *Options) (*Server, *httptest.Server) {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(s.Close)
	return s, hs
}

// testContext bounds every test that waits on the network.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// chatBody builds a request body with one user message.
func chatBody(stream bool, script string) map[string]any {
	return map[string]any{
		"model":    "test-model",
		"stream":   stream,
		"messages": []map[string]any{{"role": "user", "content": script}},
	}
}

func post(ctx context.Context, t testing.TB, hs *httptest.Server, body any) *http.Response {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseReader is a plain SSE reader: it knows nothing of OpenAI, only
// "data:" lines separated by blank lines.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReader(r)} }

// next returns the next event's data, or the read error.
func (s *sseReader) next() (string, error) {
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line != "" {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if data == nil {
				continue
			}
			return strings.Join(data, "\n"), nil
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
}

// readStream reads events up to [DONE]; it fails the test on any error.
func readStream(t testing.TB, resp *http.Response) []string {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	r := newSSEReader(resp.Body)
	var events []string
	for {
		data, err := r.next()
		if err != nil {
			t.Fatalf("stream ended without [DONE] after %d events: %v", len(events), err)
		}
		if data == "[DONE]" {
			if rest, _ := io.ReadAll(resp.Body); len(bytes.TrimSpace(rest)) > 0 {
				t.Fatalf("bytes after [DONE]: %q", rest)
			}
			return events
		}
		events = append(events, data)
	}
}

// decoded is a loosely decoded chunk, for assertions that need not spell
// out every byte.
type decoded struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role             string `json:"role"`
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
}

func decodeAll(t testing.TB, events []string) []decoded {
	t.Helper()
	out := make([]decoded, len(events))
	for i, e := range events {
		if err := json.Unmarshal([]byte(e), &out[i]); err != nil {
			t.Fatalf("event %d %q: %v", i, e, err)
		}
	}
	return out
}

// streamText concatenates content, reasoning (either field) and the
// finish reason of a stream.
func streamText(chunks []decoded) (content, reasoning, finish string) {
	for _, c := range chunks {
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			reasoning += ch.Delta.ReasoningContent + ch.Delta.Reasoning
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return content, reasoning, finish
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
