// Command loom serves the OpenAI Responses API in front of an
// OpenAI-compatible inference engine.
//
//	loom serve --upstream-url http://127.0.0.1:8000/v1 --model openai/gpt-oss-20b
//	loom demo
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/loomgate/loom/telemetry"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
)

const usage = `loom serves the OpenAI Responses API in front of open-weight models.

Usage:
  loom serve [flags]   run the server (loom serve -h lists the flags)
  loom demo            run loom with a scripted model and show a streamed function-call round trip (loom demo -h says more)
  loom mcp login LABEL log loom in to an MCP server of --mcp-servers behind OAuth, once (loom mcp -h says more)
  loom --version       print the version and commit
`

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loom:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 2 for a configuration loom refuses (a bad flag, a value out
// of range), as flag parsing conventionally does, and 1 for the rest.
func exitCode(err error) int {
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		return 2
	}
	return 1
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return configErrorf("a subcommand is required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	second := make(chan struct{})
	stop := onSignals(cancel, func() { close(second) })
	defer stop()
	switch args[0] {
	case "serve":
		cfg, err := parseServeFlags(args[1:], getenv)
		if errors.Is(err, flag.ErrHelp) {
			printServeUsage(stdout)
			return nil
		}
		if err != nil {
			return err
		}
		logger := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
		for _, w := range cfg.Warnings {
			logger.Warn(w)
		}
		m := NewMain(cfg, logger)
		if err := m.Open(ctx); err != nil {
			return err
		}
		// A second signal cuts the drain short (an operator at a
		// terminal pressing Ctrl-C twice).
		served := make(chan struct{})
		go func() {
			select {
			case <-second:
				m.EndDrain()
			case <-served:
			}
		}()
		err = m.Run(ctx)
		close(served)
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		return err
	case "demo":
		if len(args) > 1 {
			switch args[1] {
			case "-h", "-help", "--help", "help":
				fmt.Fprint(stdout, demoUsage)
				return nil
			}
			fmt.Fprint(stderr, demoUsage)
			return configErrorf("loom demo takes no arguments, got %q", args[1:])
		}
		return runDemo(ctx, stdout, stderr)
	case "mcp":
		return runMCP(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, versionString())
		return nil
	}
	fmt.Fprint(stderr, usage)
	return configErrorf("unknown subcommand %q", args[0])
}

// commit is the commit loom was built from when the toolchain did not
// record one (a build with -buildvcs=false):
// go build -ldflags "-X main.commit=$(git rev-parse HEAD)" ./cmd/loom
var commit = "(unknown)"

// versionString is loom's module version and the VCS commit it was built
// from, as the Go toolchain recorded them in the binary.
func versionString() string {
	version, commit, modified := "(unknown)", commit, false
	if info, ok := debug.ReadBuildInfo(); ok {
		version = info.Main.Version
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("loom %s commit %s %s", version, commit, runtime.Version())
}

// onSignals calls first on the first SIGINT or SIGTERM and second on the
// next one, after which the signals get their default action again (a
// third one terminates the process at once). stop stops listening.
func onSignals(first, second func()) (stop func()) {
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer signal.Stop(sigs)
		for _, f := range []func(){first, second} {
			select {
			case <-sigs:
				f()
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
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
