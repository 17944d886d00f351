// Command mockllm serves the scripted upstream of package mockllm on a TCP
// address, for manual runs of loom, the demo and load tests:
//
//	mockllm --addr 127.0.0.1:8081 --latency 20ms --reasoning-field reasoning
//
// Point loom's upstream at http://<addr>/v1 and script answers with
// directives in the user message (see package mockllm). It stops
// gracefully on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// shutdownTimeout bounds how long in-flight streams may take to finish
// once a signal arrives.
const shutdownTimeout = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "mockllm:", err)
		}
		os.Exit(2)
	}
}

// run serves until ctx ends. ready, if set, receives the bound address
// (tests listen on port 0).
func run(ctx context.Context, args []string, logOut io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(logOut)
	addr := fs.String("addr", "127.0.0.1:8081", "listen address")
	reasoningField := fs.String("reasoning-field", mockllm.FieldReasoningContent,
		"field carrying reasoning: reasoning_content (vLLM < 0.17, SGLang, llama.cpp) or reasoning (vLLM >= 0.17)")
	chunkSize := fs.Int("chunk-size", mockllm.DefaultChunkSize, "runes per streamed chunk")
	latency := fs.Duration("latency", 0, "pause between streamed chunks")
	firstByte := fs.Duration("first-byte-latency", 0, "pause before answering")
	models := fs.String("models", mockllm.DefaultModel, "comma-separated model names listed by /v1/models")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *reasoningField != mockllm.FieldReasoningContent && *reasoningField != mockllm.FieldReasoning {
		return fmt.Errorf("--reasoning-field must be %s or %s", mockllm.FieldReasoningContent, mockllm.FieldReasoning)
	}
	if *chunkSize <= 0 {
		return fmt.Errorf("--chunk-size must be positive")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))

	var names []string
	for name := range strings.SplitSeq(*models, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	mock := mockllm.New(&mockllm.Options{
		ReasoningField:   *reasoningField,
		ChunkSize:        *chunkSize,
		Latency:          *latency,
		FirstByteLatency: *firstByte,
		Models:           names,
		Logger:           logger,
		// Nothing here reads the recorded requests: keeping them would
		// grow the process by every body of a load run.
		Unrecorded: true,
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           mock,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("mockllm listening", "addr", ln.Addr().String(), "models", names,
		"reasoning_field", *reasoningField, "chunk_size", *chunkSize, "latency", *latency)
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("mockllm shutting down")
	// Release stalled requests first: they would otherwise hold Shutdown
	// until its deadline.
	mock.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	st := mock.Stats()
	logger.Info("mockllm stopped", "started", st.Started, "completed", st.Completed,
		"cancelled", st.Cancelled, "failed", st.Failed)
	return nil
}
