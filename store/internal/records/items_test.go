package records

import (
	"bytes"
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

// TestSplitItems: items whose text holds newlines, and a function output
// kept as the client sent it over several lines, survive being encoded
// for the store (EncodeRecordItems) and joined by newlines: each is one
// line, and decodes back to the same item.
func TestSplitItems(t *testing.T) {
	want := []responses.Item{
		{Type: responses.ItemMessage, ID: "a", Role: "user", Status: "completed",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "line one\nline two\r\n"}}},
		{Type: responses.ItemFunctionCall, ID: "b", Call: &responses.ItemCall{CallID: "c", Name: "f", Arguments: "{\n\"x\": 1\n}"}, Status: "completed"},
		{Type: responses.ItemFunctionCallOutput, ID: "d", Status: "completed", Call: &responses.ItemCall{CallID: "c",
			Output: json.RawMessage("[\n  {\"type\": \"input_text\",\n   \"text\": \"x\\ny\"}\n]")}},
	}
	var joined []byte
	err := EncodeRecordItems(want, nil, func(kind string, pos int, id string, item []byte) {
		if kind != KindInput || id != want[pos].ID {
			t.Errorf("row %d: kind %s, id %s", pos, kind, id)
		}
		if bytes.IndexByte(item, '\n') >= 0 {
			t.Errorf("item %d spans lines: %s", pos, item)
		}
		if pos > 0 {
			joined = append(joined, '\n')
		}
		joined = append(joined, item...)
	})
	if err != nil {
		t.Fatal(err)
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
