package responses_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomgate/loom/responses"
)

// A server decodes a create request, then validates it; either step's
// error is an *APIError that names the bad field.
func Example() {
	for _, body := range []string{
		`{"model":"gpt-oss-20b","input":"Hello"}`,
		`{"model":"gpt-oss-20b","input":"Hello","temperature":"hot"}`,
		`{"model":"gpt-oss-20b","input":[{"role":"user","content":[{"type":"output_text","text":"x"}]}]}`,
	} {
		req, err := responses.DecodeRequest([]byte(body))
		if err == nil {
			err = req.Validate(nil)
		}
		var apiErr *responses.APIError
		if errors.As(err, &apiErr) {
			fmt.Println(apiErr.Kind, apiErr.Param)
			continue
		}
		fmt.Println("ok:", req.Input.Items[0].Text())
	}
	// Output:
	// ok: Hello
	// invalid temperature
	// invalid input[0].content[0].type
}

// Validate takes the tool types the caller runs itself; others are refused.
func ExampleRequest_Validate() {
	req, _ := responses.DecodeRequest([]byte(`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"docs"}]}`))
	fmt.Println(req.Validate(nil))
	fmt.Println(req.Validate(func(typ string) bool { return typ == responses.ToolMCP }))
	// Output:
	// invalid invalid_request_error: unknown or unsupported tool type "mcp" (param tools[0].type)
	// <nil>
}

// An item marshals with every key the API requires for its type.
func ExampleItem_MarshalJSON() {
	call := responses.Item{Type: responses.ItemFunctionCall, ID: "fc_1", Call: &responses.ItemCall{CallID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	out, _ := json.Marshal(call)
	fmt.Println(string(out))
	msg := responses.Item{Type: responses.ItemMessage, ID: "msg_1", Role: "assistant", Content: []responses.ContentPart{responses.OutputText("Hi")}}
	out, _ = json.Marshal(msg)
	fmt.Println(string(out))
	// Output:
	// {"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"}
	// {"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[],"logprobs":[]}]}
}

// The Open Responses dialect prefixes loom's own item types.
func ExampleDialect_ItemType() {
	d, _ := responses.ParseDialect("openresponses")
	fmt.Println(d.ItemType(responses.ItemMCPCall), d.ItemType(responses.ItemMessage))
	fmt.Println(responses.DialectOpenAI.ItemType(responses.ItemMCPCall))
	// Output:
	// loom:mcp_call message
	// mcp_call
}
