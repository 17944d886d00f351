package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"
)

// A Main whose Open fails closes what it opened before the failure (the
// store, the listener): the caller closes only a Main that opened.
func TestFailedOpenClosesWhatItOpened(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	store := filepath.Join(t.TempDir(), "loom.db")
	for name, flags := range map[string][]string{
		"bad --mcp-servers file": {"--mcp-servers", filepath.Join(t.TempDir(), "missing.json")},
		"address in use":         {"--addr", taken.Addr().String()},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := toolConfig(t, "http://127.0.0.1:1/v1", append([]string{"--store", store}, flags...)...)
			var logs bytes.Buffer
			m := NewMain(cfg, newLogger(&logs, "text", "info"))
			if err := m.Open(context.Background()); err == nil {
				m.Close()
				t.Fatal("Open succeeded")
			}
			if m.store != nil || m.listener != nil {
				t.Errorf("after a failed Open: store %v, listener %v still held", m.store, m.listener)
			}
			// The store file is free again: a new Main opens it.
			ok := NewMain(toolConfig(t, "http://127.0.0.1:1/v1", "--store", store), newLogger(&logs, "text", "info"))
			if err := ok.Open(context.Background()); err != nil {
				t.Fatalf("reopen: %v", err)
			}
			ok.listener.Close()
			if err := ok.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
}
