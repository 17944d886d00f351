package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
)

func TestSealerRoundTripAndTamper(t *testing.T) {
	s, err := engine.NewSealer([]byte("replica secret"))
	if err != nil {
		t.Fatal(err)
	}
	blob := s.Seal("the analysis")
	if strings.Contains(blob, "analysis") {
		t.Fatalf("sealed blob shows the text: %s", blob)
	}
	if got, err := s.Open(blob); err != nil || got != "the analysis" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Another replica with the same key opens it; one with another key,
	// or an altered blob, does not.
	same, _ := engine.NewSealer([]byte("replica secret"))
	if got, err := same.Open(blob); err != nil || got != "the analysis" {
		t.Errorf("same key on another sealer: %q, %v", got, err)
	}
	other, _ := engine.NewSealer([]byte("other secret"))
	if _, err := other.Open(blob); !errors.Is(err, engine.ErrUnsealable) {
		t.Errorf("foreign key opened the blob: %v", err)
	}
	b := []byte(blob)
	b[len(b)/2] ^= 1
	if _, err := s.Open(string(b)); !errors.Is(err, engine.ErrUnsealable) {
		t.Errorf("tampered blob opened: %v", err)
	}
	if _, err := s.Open("not base64!"); !errors.Is(err, engine.ErrUnsealable) {
		t.Errorf("garbage opened: %v", err)
	}
}

func TestEncryptedReasoningComesBack(t *testing.T) {
	sealer, _ := engine.NewSealer([]byte("k"))
	b := scriptedTurns(
		[]model.Delta{{Kind: model.DeltaReasoning, Text: "I should call f."}, call(0, "f")},
		[]model.Delta{{Kind: model.DeltaText, Text: "done"}},
	)
	db, _ := sqlite.Open(context.Background(), ":memory:", nil)
	defer db.Close()
	e := engine.New(b, db, &engine.Options{Models: []string{"m"}, Sealer: sealer})
	ctx := context.Background()
	first, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","store":false,"include":["reasoning.encrypted_content"],"tools":[{"type":"function","name":"f"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := first.Output[0]
	if rs.Type != responses.ItemReasoning || rs.ReasoningFields().EncryptedContent == nil {
		t.Fatalf("first output item %+v has no encrypted_content", rs)
	}
	// The client resends the history with the reasoning reduced to its
	// encrypted_content, as Codex does.
	blob := *rs.ReasoningFields().EncryptedContent
	fc := first.Output[1]
	body := `{"model":"m","store":false,"include":["reasoning.encrypted_content"],"tools":[{"type":"function","name":"f"}],"input":[` +
		`{"role":"user","content":"x"},` +
		`{"type":"reasoning","id":"` + rs.ID + `","summary":[],"encrypted_content":"` + blob + `"},` +
		`{"type":"function_call","call_id":"` + fc.CallFields().CallID + `","name":"f","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"` + fc.CallFields().CallID + `","output":"42"}]}`
	if _, err := e.Run(ctx, decodeRequest(t, body), nil); err != nil {
		t.Fatal(err)
	}
	var seen string
	for _, it := range b.requests[1].Items {
		if it.Type == responses.ItemReasoning {
			seen = it.Text()
		}
	}
	if seen != "I should call f." {
		t.Errorf("the model's next turn saw reasoning %q", seen)
	}
	tampered := strings.Replace(body, blob, blob[:len(blob)-4]+"AAAA", 1)
	_, err = e.Run(ctx, decodeRequest(t, tampered), nil)
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) || apiErr.Kind != responses.EInvalid || apiErr.Param != "input[1].encrypted_content" {
		t.Errorf("tampered blob: %v", err)
	}
}

// A sealed compaction opens only as a compaction, and reasoning only as
// reasoning: the same key seals both, bound to their purpose.
func TestSealerPurposes(t *testing.T) {
	s, _ := engine.NewSealer([]byte("replica secret"))
	summary := s.SealCompaction("the summary")
	if got, err := s.OpenCompaction(summary); err != nil || got != "the summary" {
		t.Fatalf("OpenCompaction = %q, %v", got, err)
	}
	if _, err := s.Open(summary); !errors.Is(err, engine.ErrUnsealable) {
		t.Errorf("a compaction opened as reasoning: %v", err)
	}
	if _, err := s.OpenCompaction(s.Seal("reasoning")); !errors.Is(err, engine.ErrUnsealable) {
		t.Errorf("reasoning opened as a compaction: %v", err)
	}
}
