package tools

import (
	"encoding/json"
	"testing"
)

func TestInputRequestDecoding(t *testing.T) {
	e, err := InputRequest{Method: MethodElicit, Params: json.RawMessage(`{"message":"Which city?"}`)}.Elicitation()
	if err != nil || e.Message != "Which city?" || e.Mode != "" || string(e.RequestedSchema) != `{"type":"object"}` {
		t.Errorf("elicitation without a schema = %+v, %v; want the open object schema", e, err)
	}
	schema := `{"type":"object","properties":{"city":{"type":"string"}}}`
	e, err = InputRequest{Method: MethodElicit, Params: json.RawMessage(`{"mode":"url","message":"m","requestedSchema":` + schema + `}`)}.Elicitation()
	if err != nil || e.Mode != "url" || string(e.RequestedSchema) != schema {
		t.Errorf("elicitation = %+v, %v", e, err)
	}
	if _, err := (InputRequest{Method: MethodElicit, Params: json.RawMessage(`[1]`)}).Elicitation(); err == nil {
		t.Error("elicitation params that are not an object decoded")
	}

	s, err := InputRequest{Method: MethodCreateMessage, Params: json.RawMessage(`{"systemPrompt":"be brief","maxTokens":-3,"temperature":0.5,
		"messages":[{"role":"user","content":{"type":"text","text":"hi"}},
		{"role":"assistant","content":[{"type":"text","text":"see "},{"type":"image","data":"AAAA"}]}]}`)}.Sampling()
	switch {
	case err != nil:
		t.Fatal(err)
	case s.SystemPrompt != "be brief" || s.MaxTokens != 0 || s.Temperature == nil || *s.Temperature != 0.5:
		t.Errorf("sampling = %+v", s)
	case len(s.Messages) != 2 || s.Messages[0] != (SamplingMessage{"user", "hi"}) || s.Messages[1] != (SamplingMessage{"assistant", "see [image]"}):
		t.Errorf("sampling messages = %+v", s.Messages)
	}
	if _, err := (InputRequest{Method: MethodCreateMessage, Params: json.RawMessage(`{"messages":[]}`)}).Sampling(); err == nil {
		t.Error("a sampling request without messages decoded")
	}

	var res struct {
		Role, Model, StopReason string
		Content                 struct{ Type, Text string }
	}
	if err := json.Unmarshal(SamplingResult("m", "out", true), &res); err != nil || res.StopReason != "maxTokens" || res.Content.Text != "out" || res.Model != "m" || res.Role != "assistant" {
		t.Errorf("sampling result %+v, %v", res, err)
	}
}
