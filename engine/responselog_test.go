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
	"github.com/loomgate/loom/store/sqlite"
)

// The line that ends a response is at debug when it completed, info when
// it is incomplete and warn when it failed: a busy server at info writes
// no line per successful request.
func TestResponseLogLevel(t *testing.T) {
	tests := []struct {
		name   string
		stream func(*model.Request, func(model.Delta) error) error
		want   string // the level of the "response" line
	}{
		{"completed", deltas(model.Delta{Kind: model.DeltaText, Text: "ok"}), "DEBUG"},
		{"incomplete", deltas(model.Delta{Kind: model.DeltaText, Text: "o"}, model.Delta{Kind: model.DeltaFinish, FinishReason: model.FinishLength}), "INFO"},
		{"failed", func(*model.Request, func(model.Delta) error) error { return errors.New("upstream down") }, "WARN"},
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
				e := engine.New(&fakeBackend{stream: tt.stream}, db, &engine.Options{Models: []string{"m"},
					Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))})
				e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"}`), nil)
				var lines []string
				for line := range strings.Lines(logs.String()) {
					if strings.Contains(line, "msg=response ") {
						lines = append(lines, line)
					}
				}
				written := tt.want != "DEBUG" || level == slog.LevelDebug
				switch {
				case !written && len(lines) != 0:
					t.Errorf("at %s: %q", level, lines)
				case written && (len(lines) != 1 || !strings.Contains(lines[0], "level="+tt.want) || !strings.Contains(lines[0], "id=resp_")):
					t.Errorf("at %s: %q, want one line at %s with the id", level, lines, tt.want)
				}
			}
		})
	}
}
