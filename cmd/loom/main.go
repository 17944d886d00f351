// Command loom serves the OpenAI Responses API in front of an
// OpenAI-compatible inference engine.
//
//	loom serve --upstream-url http://127.0.0.1:8000/v1 --model openai/gpt-oss-20b
//	loom demo
package main

import (
	"context"
	"fmt"
	"github.com/loomgate/loom/telemetry"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
)

const usage = `loom serves the OpenAI Responses API in front of open-weight models.

Usage:
  loom serve [flags]   run the server (loom serve -h lists the flags)
  loom demo            run loom with a scripted model and show a streamed function-call round trip
`

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loom:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("a subcommand is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "serve":
		cfg, err := parseServeFlags(args[1:], getenv)
		if err != nil {
			return err
		}
		logger := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
		m := NewMain(cfg, logger)
		if err := m.Open(ctx); err != nil {
			return err
		}
		err = m.Run(ctx)
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		return err
	case "demo":
		return runDemo(ctx, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// newLogger logs as text through tint (coloured on a terminal) or as JSON.
// Either way a line logged while serving a request carries the request's
// trace_id and span_id.
func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		lvl = slog.LevelInfo
	}
	if format == "json" {
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})))
	}
	return slog.New(telemetry.LogHandler(tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)})))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
