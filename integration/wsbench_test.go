package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/internal/loadgen"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
)

// BenchmarkAgentRun20Turns measures a 20-turn tool-calling run (the model
// calls a function 20 times, the client answers each call, then the model
// answers) over WebSocket mode against the same run over POST + SSE, side
// by side in one run, in rotating order. loom runs as its own process
// (the cmd/loom binary), so that its CPU time (utime+stime from
// /proc/PID/stat) is loom's alone, not the scripted upstream's or the
// client's, which run in this process.
//
// Targets:
//
//   - ws: one WebSocket connection, store false, each turn continues the
//     previous with previous_response_id from the connection's cache;
//
//   - ws-store: the same with store true (the default);
//
//   - sse: POST + SSE on a pooled keep-alive client, store true, each
//     turn continues with previous_response_id from the store.
//
//     go test ./integration -run '^$' -bench AgentRun20Turns -benchtime 50x
func BenchmarkAgentRun20Turns(b *testing.B) {
	const turns = 20
	h := newHarness(b, &harnessOptions{SkipSchema: true})
	lm := startLoomProcess(b, h.MockURL)
	script := strings.Repeat("#call get_data {\"step\": 1}\n#then\n", turns) + "#say done"
	tool := map[string]any{"type": "function", "name": "get_data", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}

	client := &http.Client{Transport: loadgen.PooledTransport(64)}
	b.Cleanup(client.CloseIdleConnections)
	ctx := context.Background()

	type target struct {
		name string
		run  func() error
	}
	targets := []target{
		{"ws", func() error { return agentRunSocket(ctx, lm.url, script, tool, turns, false) }},
		{"ws-store", func() error { return agentRunSocket(ctx, lm.url, script, tool, turns, true) }},
		{"sse", func() error { return agentRunSSE(ctx, client, lm.url, script, tool, turns) }},
	}
	wall := make([]time.Duration, len(targets))
	cpu := make([]time.Duration, len(targets))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for k := range targets {
			t := targets[(i+k)%len(targets)]
			idx := (i + k) % len(targets)
			c0 := lm.cpu(b)
			start := time.Now()
			if err := t.run(); err != nil {
				b.Fatalf("%s: %v", t.name, err)
			}
			wall[idx] += time.Since(start)
			cpu[idx] += lm.cpu(b) - c0
		}
	}
	b.StopTimer()
	for k, t := range targets {
		b.ReportMetric(float64(wall[k].Microseconds())/1000/float64(b.N), t.name+"-ms/run")
		b.ReportMetric(float64(cpu[k].Microseconds())/1000/float64(b.N), t.name+"-loom-cpu-ms/run")
	}
}

// loomProcess is cmd/loom running as a child process.
type loomProcess struct {
	url string // base URL ending in /v1
	pid int
}

// startLoomProcess builds cmd/loom and serves it over upstream.
func startLoomProcess(b *testing.B, upstream string) *loomProcess {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "loom")
	build := exec.Command("go", "build", "-o", bin, "github.com/loomgate/loom/cmd/loom")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build loom: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "serve", "--addr", addr, "--upstream-url", upstream, "--store", ":memory:",
		"--model", mockllm.DefaultModel, "--log-level", "error", "--reasoning-key", "bench")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lm := &loomProcess{url: "http://" + addr + "/v1", pid: cmd.Process.Pid}
	ready := func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !testutil.Eventually(5*time.Second, ready) {
		b.Fatalf("loom did not become ready:\n%s", stderr.Bytes())
	}
	return lm
}

// cpu is the process's user plus system CPU time so far.
func (lm *loomProcess) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", lm.pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	rest := string(raw[bytes.LastIndexByte(raw, ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// agentTurn is what the client needs from a response: its id and the
// call to answer, if any.
type agentTurn struct {
	id     string
	callID string
}

// scanAgentEvent updates t from one event and reports whether the
// response has ended.
func scanAgentEvent(data []byte, t *agentTurn) (bool, error) {
	var ev struct {
		Type     string `json:"type"`
		Response struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"response"`
		Item struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		} `json:"item"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, err
	}
	switch ev.Type {
	case "response.created":
		t.id = ev.Response.ID
	case "response.output_item.done":
		if ev.Item.Type == "function_call" {
			t.callID = ev.Item.CallID
		}
	case "response.completed":
		return true, nil
	case "response.failed", "response.incomplete", "response.cancelled", "error":
		return true, fmt.Errorf("response ended with %s: %s", ev.Type, data)
	}
	return false, nil
}

// agentBody is the body of turn i of a run.
func agentBody(script string, tool map[string]any, prev agentTurn, store bool) map[string]any {
	body := map[string]any{"model": mockllm.DefaultModel, "tools": []any{tool}, "store": store}
	if prev.id == "" {
		body["input"] = script
		return body
	}
	body["previous_response_id"] = prev.id
	body["input"] = []any{map[string]any{"type": "function_call_output", "call_id": prev.callID, "output": `{"value": 42}`}}
	return body
}

// agentRunSocket runs the 20 turns on one WebSocket connection.
func agentRunSocket(ctx context.Context, baseURL, script string, tool map[string]any, turns int, store bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(baseURL, "http", "ws", 1)+"/responses", nil)
	if err != nil {
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	var prev agentTurn
	for i := 0; i <= turns; i++ {
		body := agentBody(script, tool, prev, store)
		body["type"] = "response.create"
		msg, _ := json.Marshal(body)
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			return err
		}
		var cur agentTurn
		for done := false; !done; {
			_, data, err := c.Read(ctx)
			if err != nil {
				return err
			}
			if done, err = scanAgentEvent(data, &cur); err != nil {
				return err
			}
		}
		if i < turns && cur.callID == "" {
			return fmt.Errorf("turn %d made no call", i)
		}
		prev = cur
	}
	return c.Close(websocket.StatusNormalClosure, "")
}

// agentRunSSE runs the 20 turns as POSTs with streamed answers.
func agentRunSSE(ctx context.Context, client *http.Client, baseURL, script string, tool map[string]any, turns int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var prev agentTurn
	for i := 0; i <= turns; i++ {
		body := agentBody(script, tool, prev, true)
		body["stream"] = true
		raw, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/responses", bytes.NewReader(raw))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		var cur agentTurn
		done := false
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() && !done {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			if done, err = scanAgentEvent([]byte(data), &cur); err != nil {
				resp.Body.Close()
				return err
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if !done {
			return errors.New("stream ended without response.completed")
		}
		if i < turns && cur.callID == "" {
			return fmt.Errorf("turn %d made no call", i)
		}
		prev = cur
	}
	return nil
}

// TestAgentRunHelpers runs one short run of each kind through an
// in-process loom, so that the benchmark's clients are known to work.
func TestAgentRunHelpers(t *testing.T) {
	h := newHarness(t, &harnessOptions{SkipSchema: true})
	script := strings.Repeat("#call get_data {\"step\": 1}\n#then\n", 3) + "#say done"
	tool := map[string]any{"type": "function", "name": "get_data", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}
	loom := httptest.NewServer(h.Server)
	defer loom.Close()
	base := loom.URL + "/v1"
	if err := agentRunSocket(t.Context(), base, script, tool, 3, false); err != nil {
		t.Fatalf("socket run: %v", err)
	}
	if err := agentRunSSE(t.Context(), http.DefaultClient, base, script, tool, 3); err != nil {
		t.Fatalf("SSE run: %v", err)
	}
	if n := len(h.Mock.Requests()); n != 8 {
		t.Errorf("the upstream got %d requests, want 8 (4 turns per run)", n)
	}
}
