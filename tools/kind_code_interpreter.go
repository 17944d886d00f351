package tools

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// KindCodeInterpreter is the local Python interpreter's calls:
// code_interpreter_call items whose code streams as the model writes it,
// and whose output is the interpreter's logs. The model calls it as the
// python function (its harmony built-in on a completions backend).
var KindCodeInterpreter = Register(&Kind{
	ItemType:     responses.ItemCodeInterpreterCall,
	NewArguments: func() Arguments { return &fieldArgs{field: "code"} },
	Output: func(res Result, text string) (json.RawMessage, string) {
		out, _ := json.Marshal([]map[string]string{{"type": "logs", "logs": text}})
		return out, ""
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemCodeInterpreterCall: func(it responses.Item) []responses.Item {
			code := ""
			if it.ToolFields().Code != nil {
				code = *it.ToolFields().Code
			}
			var logs []struct {
				Logs string `json:"logs"`
			}
			json.Unmarshal(it.ToolFields().Outputs, &logs)
			text := ""
			for _, l := range logs {
				text += l.Logs
			}
			result, _ := json.Marshal(text)
			// The call in the form of the chat path's python function; a
			// harmony backend renders its code to the built-in python.
			args, _ := json.Marshal(map[string]string{"code": code})
			return storedPair(it.ID, it.ID, "python", string(args), result)
		},
	},
})
