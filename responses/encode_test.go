package responses

import "testing"

// TestEncodeJSONOnce: the encoding EncodeJSON made is what
// AppendEncodedJSON appends in that dialect; another dialect, or an event
// never encoded, is encoded afresh, to the same bytes AppendJSON writes.
func TestEncodeJSONOnce(t *testing.T) {
	ev := &Event{Type: EventOutputTextDelta, SequenceNumber: 7, ItemID: "msg_1", Delta: "hi"}
	fresh, _ := ev.AppendJSON(nil, DialectOpenAI)
	other, _ := ev.AppendJSON(nil, DialectOpenResponses)
	if got, _ := ev.AppendEncodedJSON([]byte("x"), DialectOpenAI); string(got) != "x"+string(fresh) {
		t.Errorf("before EncodeJSON: %s", got)
	}
	enc, err := ev.EncodeJSON(DialectOpenAI)
	if err != nil || string(enc) != string(fresh) {
		t.Fatalf("EncodeJSON: %s, %v", enc, err)
	}
	// The remembered encoding is used: changing the event no longer
	// changes what is appended in that dialect...
	ev.Delta = "changed"
	if got, _ := ev.AppendEncodedJSON(nil, DialectOpenAI); string(got) != string(fresh) {
		t.Errorf("after EncodeJSON: %s, want the remembered %s", got, fresh)
	}
	// ...and appending does not alias it.
	got, _ := ev.AppendEncodedJSON(make([]byte, 0, 1), DialectOpenAI)
	got[0] = '!'
	if enc[0] != '{' {
		t.Errorf("appending aliased the remembered encoding")
	}
	ev.Delta = "hi"
	if got, _ := ev.AppendEncodedJSON(nil, DialectOpenResponses); string(got) != string(other) {
		t.Errorf("other dialect: %s, want %s", got, other)
	}
	// A new event (the builder assigns a whole Event) forgets it.
	*ev = Event{Type: EventOutputTextDelta, SequenceNumber: 8, ItemID: "msg_1", Delta: "next"}
	next, _ := ev.AppendJSON(nil, DialectOpenAI)
	if got, _ := ev.AppendEncodedJSON(nil, DialectOpenAI); string(got) != string(next) {
		t.Errorf("new event: %s, want %s", got, next)
	}
}
