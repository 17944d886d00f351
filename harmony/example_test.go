package harmony_test

import (
	"encoding/json"
	"fmt"

	"github.com/loomgate/loom/harmony"
)

func Example() {
	sys := harmony.NewSystemContent()
	sys.ConversationStartDate = "2025-06-28"
	weather := harmony.ToolDescription{
		Name:        "get_weather",
		Description: "Gets the current weather.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
	msgs := []harmony.Message{
		{Author: harmony.Author{Role: harmony.RoleSystem}, Content: []harmony.Content{sys}},
		{Author: harmony.Author{Role: harmony.RoleDeveloper}, Content: []harmony.Content{harmony.DeveloperContent{
			Instructions: "Be brief.",
			Tools:        []harmony.ToolNamespace{harmony.FunctionsNamespace(weather)},
		}}},
		harmony.TextMessage(harmony.RoleUser, "Weather in Paris?"),
	}

	// The prompt, as ids for the engine.
	prompt, err := harmony.RenderForCompletion(msgs, harmony.RoleAssistant, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(prompt) > 0, prompt[len(prompt)-2] == harmony.TokenStart)

	// The model's answer, parsed as it streams. The prompt already holds
	// "<|start|>assistant", so the parser starts inside that header.
	output, _ := harmony.EncodeWithSpecial(`<|channel|>analysis<|message|>Need weather.<|end|>` +
		`<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>`)
	p := harmony.NewParser(&harmony.ParseOptions{Role: harmony.RoleAssistant})
	for _, id := range output {
		if err := p.Process(id); err != nil {
			panic(err)
		}
	}
	for _, m := range p.Messages() {
		fmt.Printf("%s %q %q %q\n", m.Channel, m.Recipient, m.ContentType, m.Text())
	}
	// Output:
	// true true
	// analysis "" "" "Need weather."
	// commentary "functions.get_weather" "<|constrain|>json" "{\"city\":\"Paris\"}"
}

func ExampleRenderMessageText() {
	call := harmony.Message{
		Author:      harmony.Author{Role: harmony.RoleAssistant},
		Channel:     "commentary",
		Recipient:   "functions.get_weather",
		ContentType: "<|constrain|>json",
		Content:     []harmony.Content{harmony.Text(`{"city":"Tokyo"}`)},
	}
	text, _ := harmony.RenderMessageText(call)
	fmt.Println(text)
	// Output:
	// <|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Tokyo"}<|call|>
}

func ExampleSchemaToTypeScript() {
	ts, _ := harmony.SchemaToTypeScript(json.RawMessage(`{
		"type": "object",
		"properties": {
			"location": {"type": "string", "description": "The city"},
			"unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}
		},
		"required": ["location"]
	}`))
	fmt.Println(ts)
	// Output:
	// {
	// // The city
	// location: string,
	// unit?: "celsius" | "fahrenheit", // default: celsius
	// }
}

func ExampleParser_ProcessText() {
	// An engine that returns text, in arbitrary chunks.
	chunks := []string{"<|channel|>fin", "al<|mess", "age|>Hel", "lo!<|ret", "urn|>"}
	p := harmony.NewParser(&harmony.ParseOptions{Role: harmony.RoleAssistant})
	for _, s := range chunks {
		for len(s) > 0 {
			n, err := p.ProcessText(s)
			if err != nil {
				panic(err)
			}
			if d := p.Delta(); len(d) > 0 {
				fmt.Printf("delta %q\n", d)
			}
			s = s[n:]
		}
	}
	fmt.Println(p.Messages()[0].Channel, p.Messages()[0].Text())
	// Output:
	// delta "Hel"
	// delta "lo!"
	// final Hello!
}
