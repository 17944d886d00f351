package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/loomgate/loom/internal/loadgen"
	"github.com/loomgate/loom/model/mockllm"
)

// Where the benchmarks' clients run. By default they are goroutines of
// the benchmark's process, beside loom and the proxy; with
// LOOM_BENCH_CLIENT=process they are a load generator in a process of its
// own (this test binary run again), as a real client is. With
// LOOM_BENCH_UPSTREAM=process as well, the benchmark's process holds only
// the servers measured: loom and the proxy.
//
// In one process, at one client, the client's work shares a Go scheduler
// with loom's: the client reads its first delta only when loom's request,
// the whole stream, is done (see benchupstream_test.go).
const (
	benchClientEnv = "LOOM_BENCH_CLIENT"
	// benchClientServeEnv, set in the child's environment, makes the
	// test binary generate the load (loadgen.Serve) instead of running
	// tests.
	benchClientServeEnv = "LOOM_BENCH_CLIENT_SERVE"
)

// serveBenchClientIfAsked runs a load generator's job from standard input
// and exits when this process is a benchmark's clients.
func serveBenchClientIfAsked() {
	if os.Getenv(benchClientServeEnv) != "1" {
		return
	}
	if err := loadgen.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runBenchClients runs b.N rounds of requests to targets from clients
// concurrent clients: in this process, through client, or, with
// LOOM_BENCH_CLIENT=process, in a load generator of its own, where the
// targets whose bodies are made per request (loadgen.Target.Next) cannot
// go: they get no timings. The benchmark's timer runs from the first
// measured round, or, in a process of its own, from the process's start.
func runBenchClients(b *testing.B, client *http.Client, targets []loadgen.Target, clients int) ([][]loadgen.Timing, error) {
	own, err := benchOwnProcess(benchClientEnv)
	if err != nil {
		return nil, err
	}
	if !own {
		return loadgen.Run(context.Background(), targets, loadgen.Options{
			Clients: clients, Rounds: b.N, Client: client, Measuring: b.ResetTimer,
		})
	}
	var sent []loadgen.Target
	var at []int // at[i] is the index in targets of sent[i]
	for i, t := range targets {
		if t.Next != nil {
			b.Logf("%s: its bodies are made in this process: not measured with %s=process", t.Name, benchClientEnv)
			continue
		}
		sent = append(sent, t)
		at = append(at, i)
	}
	b.ResetTimer()
	res, err := loadgen.RunCommand(benchProcess(benchClientServeEnv), loadgen.Job{Targets: sent, Clients: clients, Rounds: b.N})
	if err != nil {
		return nil, err
	}
	all := make([][]loadgen.Timing, len(targets))
	for i, ti := range at {
		all[ti] = res[i]
	}
	return all, nil
}

// TestBenchClientInItsOwnProcess: this test binary, run again with
// LOOM_BENCH_CLIENT_SERVE=1, is a load generator that times the requests
// of the job it is given, and the scripted upstream's answers are timed
// as the benchmarks time them (a stream to its first token).
func TestBenchClientInItsOwnProcess(t *testing.T) {
	h := newHarness(t, &harnessOptions{SkipSchema: true, Mock: &mockllm.Options{Unrecorded: true}})
	job := loadgen.Job{
		Targets: []loadgen.Target{
			{Name: "whole", URL: h.MockURL + "/chat/completions", Body: []byte(`{"model":"mock-model","messages":[{"role":"user","content":"#say ok"}]}`)},
			{Name: "stream", URL: h.MockURL + "/chat/completions", Body: []byte(`{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"#say ok"}]}`), Token: `"content":"ok`},
		},
		Clients: 2,
		Rounds:  5,
	}
	res, err := loadgen.RunCommand(benchProcess(benchClientServeEnv), job)
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0]) != 5 || len(res[1]) != 5 {
		t.Fatalf("timings: %d and %d, want 5 each", len(res[0]), len(res[1]))
	}
	for _, tm := range res[1] {
		if tm.FirstToken <= 0 || tm.Lines < 3 {
			t.Errorf("stream: %+v, want its first token and all its chunks", tm)
		}
	}
	if st := h.Mock.Stats(); st.Started != 2*2+5*2 {
		t.Errorf("the upstream was sent %d requests, want 4 to warm up and 10 measured", st.Started)
	}
}
