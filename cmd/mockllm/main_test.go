package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
)

func TestRunServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	var logs testutil.LockedBuffer
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"--addr", "127.0.0.1:0", "--models", "a, b", "--reasoning-field", "reasoning", "--chunk-size", "100"},
			&logs, func(addr string) { addrc <- addr })
	}()
	var base string
	select {
	case base = <-addrc:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	}
	base = "http://" + base

	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Data) != 2 || list.Data[0].ID != "a" || list.Data[1].ID != "b" {
		t.Fatalf("models = %+v, %v", list, err)
	}

	body := `{"model":"a","stream":true,"messages":[{"role":"user","content":"#reason hmm\n#say hello"}]}`
	resp, err = http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `{"reasoning":"hmm"}`) || !strings.Contains(string(raw), `{"content":"hello"}`) ||
		!strings.HasSuffix(string(raw), "data: [DONE]\n\n") {
		t.Fatalf("stream = %s", raw)
	}

	// A stalled request must not hold the shutdown. It stalls after its
	// first chunk: the client reading that chunk is the signal that the
	// server holds the request when the shutdown begins.
	stalling, stalled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stalled)
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"a","stream":true,"messages":[{"role":"user","content":"#say hello\n#stall 1"}]}`))
		if err != nil {
			t.Errorf("stalled request: %v", err)
			close(stalling)
			return
		}
		defer resp.Body.Close()
		first, err := bufio.NewReader(resp.Body).ReadString('\n')
		if !strings.HasPrefix(first, "data: ") {
			t.Errorf("stalled request: first line %q, %v", first, err)
		}
		close(stalling)
		io.Copy(io.Discard, resp.Body)
	}()
	<-stalling
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("run did not stop")
	}
	<-stalled
	if !strings.Contains(logs.String(), "mockllm stopped") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--reasoning-field", "thoughts"},
		{"--chunk-size", "0"},
		{"--log-level", "loud"},
		{"--nope"},
		{"extra"},
	} {
		var logs testutil.LockedBuffer
		if err := run(context.Background(), args, &logs, nil); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
