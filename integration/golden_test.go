package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server"
)

var update = flag.Bool("update", false, "rewrite the golden SSE transcripts in testdata/golden")

// goldenChunkSize makes the scripted upstream send whole short sentences
// per chunk, so that a transcript has a few deltas, not dozens.
const goldenChunkSize = 16

// TestGoldenStreams compares, byte for byte, the SSE stream loom sends for
// a request with a transcript kept in testdata/golden/<name>.txtar. An
// archive holds the request (request.json, plus the dialect header in the
// archive comment) and the exact bytes streamed (stream.sse). Run with
// -update to rewrite them after an intended change, and review the diff.
//
// Beyond the bytes, each case checks the property it exists for (the
// terminal event, the reason), so that a careless -update cannot bless a
// wrong stream.
func TestGoldenStreams(t *testing.T) {
	weatherTools := `[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},` +
		`{"type":"function","name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}]`
	cases := []struct {
		name    string
		dialect string // X-Loom-Dialect header; empty uses the server default (openai)
		request string
		// terminal is the type of the last event before [DONE].
		terminal string
		check    func(t *testing.T, events []sseEvent)
		// only names the one upstream the case applies to; empty: every
		// upstream, the completions one in <name>_completions.txtar.
		only string
	}{
		{
			name:     "plain_text",
			request:  `{"model":"mock-model","stream":true,"input":"#say Hello! How can I help you today?"}`,
			terminal: "response.completed",
			check: func(t *testing.T, events []sseEvent) {
				if got := outputText(events); got != "Hello! How can I help you today?" {
					t.Errorf("streamed text = %q", got)
				}
			},
		},
		{
			name:     "plain_text_openresponses",
			dialect:  "openresponses",
			request:  `{"model":"mock-model","stream":true,"input":"#say Hello! How can I help you today?"}`,
			terminal: "response.completed",
		},
		{
			name:     "reasoning_then_text",
			request:  `{"model":"mock-model","stream":true,"input":"#reason The user asks for 2+2, which is 4.\n#say 2 + 2 = 4."}`,
			terminal: "response.completed",
			check: func(t *testing.T, events []sseEvent) {
				first, last := firstIndex(events, "response.reasoning_text.delta"), firstIndex(events, "response.output_text.delta")
				if first < 0 || last < 0 || first > last {
					t.Errorf("want reasoning deltas before text deltas; first reasoning at %d, first text at %d", first, last)
				}
			},
		},
		{
			// The dialects differ in reasoning events (response.reasoning.*).
			name:     "reasoning_then_text_openresponses",
			dialect:  "openresponses",
			request:  `{"model":"mock-model","stream":true,"input":"#reason The user asks for 2+2, which is 4.\n#say 2 + 2 = 4."}`,
			terminal: "response.completed",
			check: func(t *testing.T, events []sseEvent) {
				if firstIndex(events, "response.reasoning.delta") < 0 || firstIndex(events, "response.reasoning_text.delta") >= 0 {
					t.Errorf("want response.reasoning.delta events and no response.reasoning_text.delta in the openresponses dialect")
				}
			},
		},
		{
			name: "parallel_function_calls",
			request: `{"model":"mock-model","stream":true,"tools":` + weatherTools + `,` +
				`"input":"#call get_weather {\"city\": \"Paris\"}\n#call get_time {\"tz\": \"Europe/Paris\"}"}`,
			terminal: "response.completed",
			check: func(t *testing.T, events []sseEvent) {
				var calls []string
				for _, ev := range events {
					if ev.Type == "response.output_item.done" {
						var d struct {
							Item struct{ Type, Name, CallID string } `json:"item"`
						}
						json.Unmarshal(ev.Data, &d)
						if d.Item.Type == "function_call" {
							calls = append(calls, d.Item.Name)
						}
					}
				}
				if strings.Join(calls, ",") != "get_weather,get_time" {
					t.Errorf("function calls done = %v, want get_weather then get_time", calls)
				}
			},
		},
		{
			// The golden marks the cut message "incomplete" (see the check
			// below); -update would record whatever loom sends instead.
			name:     "max_output_tokens_incomplete",
			request:  `{"model":"mock-model","stream":true,"max_output_tokens":5,"input":"#tokens 20"}`,
			terminal: "response.incomplete",
			check: func(t *testing.T, events []sseEvent) {
				var d struct {
					Response struct {
						Status            string
						IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
					}
				}
				json.Unmarshal(events[len(events)-1].Data, &d)
				if d.Response.Status != "incomplete" || d.Response.IncompleteDetails == nil || d.Response.IncompleteDetails.Reason != "max_output_tokens" {
					t.Errorf("terminal response: status %q, incomplete_details %+v; want incomplete for max_output_tokens",
						d.Response.Status, d.Response.IncompleteDetails)
				}
				// The schema's MessageStatus: "incomplete" is for an item cut
				// off when the model "exhausts its output_token budget".
				for _, ev := range events {
					if ev.Type != "response.output_item.done" {
						continue
					}
					var done struct{ Item struct{ Type, Status string } }
					json.Unmarshal(ev.Data, &done)
					if done.Item.Type == "message" && done.Item.Status != "incomplete" {
						t.Errorf("message cut by max_output_tokens has status %q, want incomplete", done.Item.Status)
					}
				}
			},
		},
		{
			// Harmony only: a preamble on the commentary channel, then the
			// call. The preamble is an assistant message with phase
			// "commentary", announced as such, before the function_call.
			name:     "preamble_then_call",
			only:     "completions",
			request:  `{"model":"mock-model","stream":true,"tools":` + weatherTools + `,"input":"#preamble Checking the weather.\n#call get_weather {\"city\": \"Paris\"}"}`,
			terminal: "response.completed",
			check: func(t *testing.T, events []sseEvent) {
				var got []string
				for _, ev := range events {
					if ev.Type != "response.output_item.added" && ev.Type != "response.output_item.done" {
						continue
					}
					var d struct {
						Item struct{ Type, Phase, Name string } `json:"item"`
					}
					json.Unmarshal(ev.Data, &d)
					got = append(got, ev.Type[len("response.output_item."):]+" "+d.Item.Type+" "+d.Item.Phase+d.Item.Name)
				}
				want := []string{"added message commentary", "done message commentary", "added function_call get_weather", "done function_call get_weather"}
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("items %q, want %q", got, want)
				}
				if got := outputText(events); got != "Checking the weather." {
					t.Errorf("streamed text %q", got)
				}
			},
		},
		{
			name:     "upstream_cut_failed",
			request:  `{"model":"mock-model","stream":true,"input":"#say This answer will never be finished by the model.\n#cut 3"}`,
			terminal: "response.failed",
			check: func(t *testing.T, events []sseEvent) {
				if len(events) < 2 || events[len(events)-2].Type != "error" {
					t.Errorf("want an error event right before response.failed")
				}
			},
		},
	}
	for _, up := range upstreams {
		for _, tc := range cases {
			if tc.only != "" && tc.only != up.name {
				continue
			}
			name := tc.name
			if up.name != "chat" {
				name += "_" + up.name
			}
			t.Run(name, func(t *testing.T) {
				opts := &harnessOptions{Deterministic: true, Mock: &mockllm.Options{ChunkSize: goldenChunkSize}}
				h := up.harness(t, opts)
				hdr := http.Header{}
				if tc.dialect != "" {
					hdr.Set(server.DialectHeader, tc.dialect)
				}
				status, stream := postStream(t, h.BaseURL+"/responses", tc.request, hdr)
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, stream)
				}
				if opts.Completions != nil {
					stream = normalizeCallIDs(stream)
				}

				events := parseSSE(t, stream)
				if len(events) == 0 {
					t.Fatal("no events")
				}
				if got := events[len(events)-1].Type; got != tc.terminal {
					t.Errorf("last event %q, want %q", got, tc.terminal)
				}
				if !bytes.HasSuffix(stream, []byte("\ndata: [DONE]\n\n")) {
					t.Errorf("stream does not end with data: [DONE]")
				}
				if tc.check != nil {
					tc.check(t, events)
				}

				comment := "POST /v1/responses\n"
				if tc.dialect != "" {
					comment += server.DialectHeader + ": " + tc.dialect + "\n"
				}
				got := &txtar.Archive{Comment: []byte(comment), Files: []txtar.File{
					{Name: "request.json", Data: []byte(tc.request + "\n")},
					{Name: "stream.sse", Data: stream},
				}}
				compareGolden(t, filepath.Join("testdata", "golden", name+".txtar"), got)
			})
		}
	}
}

// harmonyCallID matches the call ids the completions backend makes up
// ("call_" and 26 random base32 characters): harmony has no call ids.
var harmonyCallID = regexp.MustCompile(`call_[A-Z2-7]{26}\b`)

// normalizeCallIDs replaces each distinct generated call id by call_hN, in
// order of first appearance, so that a transcript is deterministic and
// still shows which events share a call.
func normalizeCallIDs(stream []byte) []byte {
	seen := map[string]string{}
	return harmonyCallID.ReplaceAllFunc(stream, func(id []byte) []byte {
		n, ok := seen[string(id)]
		if !ok {
			n = fmt.Sprintf("call_h%d", len(seen)+1)
			seen[string(id)] = n
		}
		return []byte(n)
	})
}

// compareGolden checks got against the archive at path, or writes it there
// with -update.
func compareGolden(t *testing.T, path string, got *txtar.Archive) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, txtar.Format(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./integration -run TestGoldenStreams -update to create it)", err)
	}
	if !bytes.Equal(want.Comment, got.Comment) {
		t.Errorf("%s: header differs:\n%s", path, lineDiff(string(want.Comment), string(got.Comment)))
	}
	wantFiles := map[string][]byte{}
	for _, f := range want.Files {
		wantFiles[f.Name] = f.Data
	}
	for _, f := range got.Files {
		w, ok := wantFiles[f.Name]
		switch {
		case !ok:
			t.Errorf("%s: no file %s", path, f.Name)
		case !bytes.Equal(w, f.Data):
			t.Errorf("%s: %s differs (-golden +got; rerun with -update if intended):\n%s", path, f.Name, lineDiff(string(w), string(f.Data)))
		}
		delete(wantFiles, f.Name)
	}
	for name := range wantFiles {
		t.Errorf("%s: unexpected file %s", path, name)
	}
}

// lineDiff is a small line diff (longest common subsequence) with two
// lines of context, enough to spot which event changed in a transcript.
// Transcripts are a few hundred lines, so the quadratic table is fine.
func lineDiff(a, b string) string {
	x, y := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			lines = append(lines, line{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', x[i]})
			i++
		default:
			lines = append(lines, line{'+', y[j]})
			j++
		}
	}
	const context = 2
	var out strings.Builder
	lastShown := -1
	for k, l := range lines {
		near := false
		for d := max(0, k-context); d <= min(len(lines)-1, k+context); d++ {
			if lines[d].op != ' ' {
				near = true
				break
			}
		}
		if !near {
			continue
		}
		if lastShown >= 0 && k > lastShown+1 {
			out.WriteString("...\n")
		}
		lastShown = k
		out.WriteByte(l.op)
		out.WriteString(strings.TrimSuffix(l.text, "\n"))
		out.WriteByte('\n')
		if out.Len() > 8<<10 {
			out.WriteString("... (diff truncated)\n")
			break
		}
	}
	return out.String()
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	Name string          // the event: line
	Type string          // the type field of the data
	Data json.RawMessage // the data: line
}

// parseSSE splits a stream into its events, checking that every event's
// name matches the type in its data. Comments and [DONE] are skipped.
func parseSSE(t *testing.T, stream []byte) []sseEvent {
	t.Helper()
	var events []sseEvent
	for block := range strings.SplitSeq(string(stream), "\n\n") {
		var ev sseEvent
		for line := range strings.SplitSeq(block, "\n") {
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				ev.Name = name
			} else if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
				ev.Data = json.RawMessage(data)
			}
		}
		if ev.Data == nil {
			continue
		}
		var head struct{ Type string }
		if err := json.Unmarshal(ev.Data, &head); err != nil {
			t.Fatalf("event data is not JSON: %v: %s", err, ev.Data)
		}
		ev.Type = head.Type
		if ev.Name != ev.Type {
			t.Errorf("event: %q but data type %q", ev.Name, ev.Type)
		}
		events = append(events, ev)
	}
	return events
}

// postStream POSTs body to url and returns the status and the whole
// response body, within a bound so that a hung stream fails the test.
func postStream(t *testing.T, url, body string, hdr http.Header) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, b
}

func firstIndex(events []sseEvent, typ string) int {
	for i, ev := range events {
		if ev.Type == typ {
			return i
		}
	}
	return -1
}

// outputText joins the text deltas of a stream.
func outputText(events []sseEvent) string {
	var sb strings.Builder
	for _, ev := range events {
		if ev.Type == "response.output_text.delta" {
			var d struct{ Delta string }
			json.Unmarshal(ev.Data, &d)
			sb.WriteString(d.Delta)
		}
	}
	return sb.String()
}
