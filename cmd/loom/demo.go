package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

const demoUsage = `Usage: loom demo

Runs loom in this process in front of a scripted model (model/mockllm) and a
temporary SQLite store, then plays a client: it asks for the weather with a
function tool, runs the function itself when the model calls it, sends the
result back with previous_response_id, and prints each request body and every
streamed event as it arrives.

It needs no GPU, no network and no flags. It keeps nothing: the store is
removed when it exits. To serve a real engine, run loom serve (loom serve -h
lists its flags):

  loom serve --upstream-url http://127.0.0.1:8000/v1 --model openai/gpt-oss-20b
`

// runDemo starts loom in-process over the scripted model and a temporary
// store, then plays a client: it asks for the weather with a function
// tool, runs the function itself when the model calls it, and sends the
// result back with previous_response_id. Every streamed event is printed
// as it arrives.
func runDemo(ctx context.Context, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	// The scripted upstream, paced so the stream is visible.
	mock := mockllm.New(&mockllm.Options{Latency: 40 * time.Millisecond, ChunkSize: 6})
	defer mock.Close()
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mockSrv := &http.Server{Handler: mock, ReadHeaderTimeout: 5 * time.Second}
	go mockSrv.Serve(ml)
	defer mockSrv.Close()

	dir, err := os.MkdirTemp("", "loom-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := &Config{
		Addr:            "127.0.0.1:0",
		UpstreamURL:     "http://" + ml.Addr().String() + "/v1",
		UpstreamAPI:     "chat",
		Models:          []string{mockllm.DefaultModel},
		Store:           filepath.Join(dir, "loom.db"),
		EventDialect:    "openai",
		ShutdownTimeout: 5 * time.Second,
		RequestTimeout:  time.Minute,
		MaxBodyBytes:    1 << 20,
		ReasoningKey:    "loom demo",
	}
	m := NewMain(cfg, newLogger(stderr, "text", "warn"))
	if err := m.Open(ctx); err != nil {
		return err
	}
	defer m.Close()
	serveCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m.Run(serveCtx) }()
	defer func() { stopServe(); <-served }()

	base := "http://" + m.Addr() + "/v1/responses"
	fmt.Fprintf(stdout, "loom demo: loom is serving on %s in front of a SCRIPTED model (no GPU, no network).\n", m.Addr())
	fmt.Fprintf(stdout, "The model's answers are scripted by directives in the user message; see model/mockllm.\n\n")

	script := "What is the weather in Paris?\n" +
		"#reason The user wants the weather; I should call get_weather.\n" +
		"#call get_weather {\"city\": \"Paris\"}\n" +
		"#then\n" +
		"#say It is 21°C and sunny in Paris."
	first := map[string]any{
		"model":  mockllm.DefaultModel,
		"stream": true,
		"input":  script,
		"tools": []any{map[string]any{
			"type": "function", "name": "get_weather", "description": "Current weather for a city",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		}},
	}
	fmt.Fprintln(stdout, "1) client -> loom: POST /v1/responses (stream, one function tool)")
	resp1, calls, err := streamDemo(ctx, base, first, stdout)
	if err != nil {
		return err
	}
	if len(calls) == 0 {
		return fmt.Errorf("the scripted model made no function call")
	}
	call := calls[0]
	output := `{"temperature_c": 21, "sky": "sunny"}`
	fmt.Fprintf(stdout, "\n2) the client runs %s(%s) itself -> %s\n\n", call.Name, call.Arguments, output)

	second := map[string]any{
		"model":                mockllm.DefaultModel,
		"stream":               true,
		"previous_response_id": resp1,
		"input":                []any{map[string]any{"type": "function_call_output", "call_id": call.CallID, "output": output}},
	}
	fmt.Fprintf(stdout, "3) client -> loom: POST /v1/responses (previous_response_id %s, function_call_output)\n", resp1)
	if _, _, err := streamDemo(ctx, base, second, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nDone. Both responses were stored, in a temporary database the demo removes as it exits, so they are gone now;\n"+
		"against `loom serve`, GET /v1/responses/%s would return the first.\n", resp1)
	return nil
}

// demoJSON writes a request body one top-level field a line, each value
// compact, in the order encoding/json writes them.
func demoJSON(body map[string]any) string {
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("   {\n")
	for i, k := range keys {
		v, _ := json.Marshal(body[k])
		fmt.Fprintf(&b, "     %q: %s", k, v)
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("   }\n")
	return b.String()
}

type demoCall struct {
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// streamDemo posts body, prints each event, and returns the response id
// and the function calls it made.
func streamDemo(ctx context.Context, url string, body map[string]any, stdout io.Writer) (string, []demoCall, error) {
	b, _ := json.Marshal(body)
	// The request as sent, so that it can be replayed with curl against
	// a real loom.
	fmt.Fprintf(stdout, "   request body:\n%s   events:\n", demoJSON(body))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return "", nil, fmt.Errorf("loom answered %s: %s", res.Status, msg)
	}
	var respID string
	var calls []demoCall
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			fmt.Fprintln(stdout, "   [DONE]")
			break
		}
		var ev struct {
			Type     string          `json:"type"`
			Seq      int             `json:"sequence_number"`
			Delta    string          `json:"delta"`
			Item     json.RawMessage `json:"item"`
			Response struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return "", nil, fmt.Errorf("bad event %q: %w", data, err)
		}
		line := fmt.Sprintf("   #%-3d %s", ev.Seq, ev.Type)
		switch {
		case ev.Delta != "":
			line += fmt.Sprintf("  %q", ev.Delta)
		case ev.Response.ID != "":
			respID = ev.Response.ID
			line += fmt.Sprintf("  (%s, %s)", ev.Response.ID, ev.Response.Status)
		case ev.Type == "response.output_item.done":
			var it struct {
				Type string `json:"type"`
				demoCall
			}
			json.Unmarshal(ev.Item, &it)
			line += "  " + it.Type
			if it.Type == "function_call" {
				line += fmt.Sprintf(" %s(%s) call_id=%s", it.Name, it.Arguments, it.CallID)
				calls = append(calls, it.demoCall)
			}
		}
		fmt.Fprintln(stdout, line)
	}
	return respID, calls, sc.Err()
}
