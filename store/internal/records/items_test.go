package records

import (
	"encoding/json"
	"testing"

	"github.com/loomgate/loom/responses"
)

// BenchmarkDecodeItem decodes a stored assistant message, the most common
// item of a chain.
func BenchmarkDecodeItem(b *testing.B) {
	data, err := json.Marshal(&responses.Item{Type: responses.ItemMessage, ID: "msg_1", Role: "assistant", Status: "completed",
		Content: []responses.ContentPart{responses.OutputText("an answer of a few words")}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var it responses.Item
		if err := DecodeItem(data, &it); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeItem(t *testing.T) {
	want := responses.Item{Type: responses.ItemMessage, ID: "msg_1", Role: "user", Status: "completed",
		Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "hi"}}}
	data, _ := json.Marshal(&want)
	var got responses.Item
	if err := DecodeItem(data, &got); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(&got)
	if string(again) != string(data) {
		t.Errorf("round trip: %s, want %s", again, data)
	}
	if err := DecodeItem([]byte(`{"type":`), &got); err == nil {
		t.Error("truncated item decoded")
	}
}

// TestSplitItems: items whose text holds newlines survive being joined by
// newlines, because their JSON escapes them.
func TestSplitItems(t *testing.T) {
	want := []responses.Item{
		{Type: responses.ItemMessage, ID: "a", Role: "user", Status: "completed",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "line one\nline two\r\n"}}},
		{Type: responses.ItemFunctionCall, ID: "b", Call: &responses.ItemCall{CallID: "c", Name: "f", Arguments: "{\n\"x\": 1\n}"}, Status: "completed"},
	}
	var joined []byte
	for i := range want {
		b, err := json.Marshal(&want[i])
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			joined = append(joined, '\n')
		}
		joined = append(joined, b...)
	}
	got, err := SplitItems(joined)
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("split %s, want %s", gj, wj)
	}
	if got, err := SplitItems(nil); got != nil || err != nil {
		t.Errorf("SplitItems(nil) = %v, %v", got, err)
	}
}
