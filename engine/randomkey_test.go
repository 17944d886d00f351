package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/store/sqlite"
)

// TestRandomKeyWarnsWhenItMatters: without a configured reasoning key,
// nothing is said until a client asks for encrypted reasoning; then one
// warning says how to set the key, however many such requests follow.
func TestRandomKeyWarnsWhenItMatters(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logs bytes.Buffer
	b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaReasoning, Text: "hmm"}, model.Delta{Kind: model.DeltaText, Text: "ok"})}
	e := engine.New(b, db, &engine.Options{Models: []string{"m"}, Sealer: engine.NewRandomSealer(),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if _, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("a warning without encrypted reasoning asked for: %s", logs.String())
	}
	for range 3 {
		resp, err := e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","store":false,"include":["reasoning.encrypted_content"]}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Output[0].ReasoningFields().EncryptedContent == nil {
			t.Fatal("no encrypted content under the random key")
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "--reasoning-key") {
		t.Errorf("%d warnings, want one naming --reasoning-key: %s", n, logs.String())
	}
}
