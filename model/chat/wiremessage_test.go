package chat

import (
	"reflect"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// A text message is written by hand exactly as go-openai writes it.
func TestTextMessageJSONMatchesGoOpenAI(t *testing.T) {
	for _, m := range []wireMessage{
		{Role: openai.ChatMessageRoleUser, Content: "hi"},
		{Role: openai.ChatMessageRoleAssistant, Content: "a <b> & \"q\" \n é \u2028 \x01"},
		{Role: openai.ChatMessageRoleSystem, Content: "be brief"},
	} {
		if !m.textOnly() {
			t.Fatalf("%+v is not text only", m)
		}
		got, err := m.MarshalJSON()
		want, wantErr := openai.ChatCompletionMessage(m).MarshalJSON()
		if err != nil || wantErr != nil || string(got) != string(want) {
			t.Errorf("got %s (%v), want %s (%v)", got, err, want, wantErr)
		}
	}
	// Anything else goes through go-openai.
	for _, m := range []wireMessage{
		{Role: openai.ChatMessageRoleUser},
		{Role: openai.ChatMessageRoleTool, Content: "r", ToolCallID: "c1"},
		{Role: openai.ChatMessageRoleAssistant, Content: "x", ReasoningContent: "think"},
		{Role: openai.ChatMessageRoleUser, Content: "x", Name: "n"},
	} {
		if m.textOnly() {
			t.Errorf("%+v taken as text only", m)
		}
	}
	// textOnly names every field go-openai has: a new one would be
	// dropped from text messages without it.
	if n := reflect.TypeFor[openai.ChatCompletionMessage]().NumField(); n != 9 {
		t.Errorf("go-openai's ChatCompletionMessage has %d fields; textOnly knows 9", n)
	}
}
