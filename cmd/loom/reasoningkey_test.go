package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/store/postgres/pgtest"
)

// TestReasoningKeyKeptInStore: without --reasoning-key, what loom seals (a
// compaction, encrypted reasoning) opens on a loom started later on the
// same store (a restart, or another replica), on both stores, and the log
// says the key came from the store. A loom with another key refuses the
// blob with a 400 that names the likely cause, not tampering alone.
func TestReasoningKeyKeptInStore(t *testing.T) {
	mock := mockllm.New(nil)
	up := httptest.NewServer(mock)
	defer up.Close()
	defer mock.Close()
	upstream := up.URL + "/v1"
	stores := []struct{ name, store string }{
		{"sqlite", filepath.Join(t.TempDir(), "loom.db")},
		{"postgres", pgtest.URL(t)},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			var compaction, reasoning string
			t.Run("first", func(t *testing.T) {
				var logs testutil.LockedBuffer
				base := serveOn(t, st.store, upstream, &logs, "--drain-delay", "0")
				compaction = sealedCompaction(t, base)
				reasoning = sealedReasoning(t, base)
				if !logHas(logs.String(), "reasoning key", "store") {
					t.Errorf("no info line saying the reasoning key came from the store:\n%s", logs.String())
				}
			})
			if compaction == "" || reasoning == "" {
				return
			}
			t.Run("restarted", func(t *testing.T) {
				base := serveOn(t, st.store, upstream, &testutil.LockedBuffer{}, "--drain-delay", "0")
				for name, input := range sealedInputs(compaction, reasoning) {
					if status, b := do(t, "POST", base+"/responses", input); status != http.StatusOK {
						t.Errorf("%s sealed before the restart: %d %s", name, status, b)
					}
				}
			})
			t.Run("another key", func(t *testing.T) {
				var logs testutil.LockedBuffer
				base := serveOn(t, st.store, upstream, &logs, "--reasoning-key", "a-different-key", "--drain-delay", "0")
				if !logHas(logs.String(), "reasoning key", "--reasoning-key") {
					t.Errorf("no info line saying the reasoning key came from --reasoning-key:\n%s", logs.String())
				}
				for name, input := range sealedInputs(compaction, reasoning) {
					status, b := do(t, "POST", base+"/responses", input)
					var e struct {
						Error struct{ Message, Param string }
					}
					json.Unmarshal(b, &e)
					if status != http.StatusBadRequest || !strings.Contains(e.Error.Message, "different reasoning key") ||
						!strings.Contains(e.Error.Message, "--reasoning-key") || e.Error.Param != "input[0].encrypted_content" {
						t.Errorf("%s under another key: %d %s", name, status, b)
					}
				}
			})
		})
	}
}

// sealedCompaction compacts a short conversation on base and returns the
// compaction's encrypted_content.
func sealedCompaction(t *testing.T, base string) string {
	t.Helper()
	status, b := do(t, "POST", base+"/responses/compact", `{"model":"mock-model","input":"#say a summary\nsomething to compact"}`)
	var c struct {
		Output []struct {
			Type             string `json:"type"`
			EncryptedContent string `json:"encrypted_content"`
		}
	}
	if err := json.Unmarshal(b, &c); status != http.StatusOK || err != nil || len(c.Output) != 1 || c.Output[0].EncryptedContent == "" {
		t.Fatalf("compact: %d %s", status, b)
	}
	return c.Output[0].EncryptedContent
}

// sealedReasoning asks base for encrypted reasoning, as a client that keeps
// the history itself does, and returns its encrypted_content.
func sealedReasoning(t *testing.T, base string) string {
	t.Helper()
	status, b := do(t, "POST", base+"/responses", `{"model":"mock-model","input":"#reason thinking it over\n#say ok",
		"store":false,"include":["reasoning.encrypted_content"]}`)
	var r struct {
		Output []struct {
			Type             string  `json:"type"`
			EncryptedContent *string `json:"encrypted_content"`
		}
	}
	if err := json.Unmarshal(b, &r); status != http.StatusOK || err != nil {
		t.Fatalf("encrypted reasoning: %d %s", status, b)
	}
	for _, it := range r.Output {
		if it.Type == "reasoning" && it.EncryptedContent != nil && *it.EncryptedContent != "" {
			return *it.EncryptedContent
		}
	}
	t.Fatalf("no encrypted reasoning in %s", b)
	return ""
}

// sealedInputs are requests that hand the sealed blobs back, each as the
// first input item.
func sealedInputs(compaction, reasoning string) map[string]string {
	return map[string]string{
		"compaction": `{"model":"mock-model","input":[{"type":"compaction","encrypted_content":"` + compaction + `"},
			{"type":"message","role":"user","content":"#say continued"}]}`,
		"reasoning": `{"model":"mock-model","store":false,"input":[{"type":"reasoning","summary":[],"encrypted_content":"` + reasoning + `"},
			{"type":"message","role":"user","content":"#say continued"}]}`,
	}
}

// logHas reports whether a JSON log has a line with message msg and
// attribute source.
func logHas(logs, msg, source string) bool {
	for line := range strings.Lines(logs) {
		var rec struct{ Msg, Source, Level string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg && rec.Source == source && rec.Level == "INFO" {
			return true
		}
	}
	return false
}
