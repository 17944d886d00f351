package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/telemetry"
	"github.com/loomgate/loom/tenant"
)

// The line that ends a response is at info whatever its outcome (warn for
// a failure), with what an operator looks for: its id, tenant, status,
// duration, tokens and the request's trace id. QuietResponses moves the
// line of a response that did not fail to debug.
func TestResponseLogLevel(t *testing.T) {
	tests := []struct {
		name   string
		stream func(*model.Request, func(model.Delta) error) error
		quiet  bool
		want   string // the level of the "response" line
		status string
	}{
		{"completed", deltas(model.Delta{Kind: model.DeltaText, Text: "ok"}), false, "INFO", "completed"},
		{"incomplete", deltas(model.Delta{Kind: model.DeltaText, Text: "o"}, model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishLength}), false, "INFO", "incomplete"},
		{"failed", func(*model.Request, func(model.Delta) error) error { return errors.New("upstream down") }, false, "WARN", "failed"},
		{"completed quiet", deltas(model.Delta{Kind: model.DeltaText, Text: "ok"}), true, "DEBUG", "completed"},
		{"failed quiet", func(*model.Request, func(model.Delta) error) error { return errors.New("upstream down") }, true, "WARN", "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
				var logs bytes.Buffer
				e := engine.New(&fakeBackend{stream: tt.stream}, db, &engine.Options{Models: []string{"m"}, QuietResponses: tt.quiet,
					Logger: slog.New(telemetry.LogHandler(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level})))})
				ctx := telemetry.ContinueTrace(tenant.With(context.Background(), "acme"), "4bf92f3577b34da6a3ce929d0e0e4736")
				e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","stream":true}`), func(*responses.Event) error { return nil })
				var lines []string
				for line := range strings.Lines(logs.String()) {
					if strings.Contains(line, "msg=response ") {
						lines = append(lines, line)
					}
				}
				written := tt.want != "DEBUG" || level == slog.LevelDebug
				if !written {
					if len(lines) != 0 {
						t.Errorf("at %s: %q", level, lines)
					}
					continue
				}
				if len(lines) != 1 {
					t.Fatalf("at %s: %q, want one line", level, lines)
				}
				for _, want := range []string{"level=" + tt.want, "id=resp_", "tenant=acme", "status=" + tt.status, "duration=",
					"input_tokens=", "output_tokens=", "trace_id=4bf92f3577b34da6a3ce929d0e0e4736"} {
					if !strings.Contains(lines[0], want) {
						t.Errorf("at %s: %q lacks %q", level, lines[0], want)
					}
				}
			}
		})
	}
}
