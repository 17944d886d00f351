package tools

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// KindLocalShell is the local_shell tool, which runs on the client like a
// function: the model's call goes out as a local_shell_call item once the
// turn is over, and the client answers with a local_shell_call_output. The
// model is offered it as a function of this name taking the exec action.
var KindLocalShell = Register(&Kind{
	ToolType:   responses.ToolLocalShell,
	ItemType:   responses.ItemLocalShellCall,
	OutputType: responses.ItemLocalShellCallOutput,
	Deferred:   true,
	Define:     func(responses.Tool) Definition { return localShellDefinition },
	ClientItem: func(callID, arguments string, newID func(string) string) responses.Item {
		return responses.Item{Type: responses.ItemLocalShellCall, ID: newID("lsh"), Call: &responses.ItemCall{CallID: callID},
			Tool: &responses.ItemTool{Action: localShellAction(arguments)}, Status: responses.StatusCompleted}
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemLocalShellCall: func(it responses.Item) []responses.Item {
			return []responses.Item{{Type: responses.ItemFunctionCall, ID: it.ID, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Name: localShellName, Arguments: localShellArguments(it.ToolFields().Action)}}}
		},
		responses.ItemLocalShellCallOutput: func(it responses.Item) []responses.Item {
			return []responses.Item{{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: it.CallFields().CallID, Output: it.CallFields().Output}}}
		},
	},
})

const localShellName = "local_shell"

// localShellDefinition is the function the model is offered local_shell
// as, taking the exec action.
var localShellDefinition = Definition{
	Name: localShellName,
	Description: "Runs a command on the user's machine and returns its output. " +
		"command is the program and its arguments (use [\"bash\", \"-lc\", \"...\"] for a shell line).",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"array","items":{"type":"string"}},` +
		`"working_directory":{"type":"string"},` +
		`"timeout_ms":{"type":"integer"},` +
		`"env":{"type":"object","additionalProperties":{"type":"string"}}},` +
		`"required":["command"]}`),
}

// localShellAction turns the model's arguments into the exec action of a
// local_shell_call item.
func localShellAction(arguments string) json.RawMessage {
	var a struct {
		Command          []string          `json:"command"`
		WorkingDirectory *string           `json:"working_directory,omitempty"`
		TimeoutMS        *int              `json:"timeout_ms,omitempty"`
		Env              map[string]string `json:"env"`
	}
	if json.Unmarshal([]byte(arguments), &a) != nil {
		// The client sees what the model wrote, as one command word, and
		// can report the error back.
		a.Command = []string{arguments}
	}
	if a.Command == nil {
		a.Command = []string{}
	}
	if a.Env == nil {
		a.Env = map[string]string{}
	}
	b, _ := json.Marshal(struct {
		Type             string            `json:"type"`
		Command          []string          `json:"command"`
		WorkingDirectory *string           `json:"working_directory,omitempty"`
		TimeoutMS        *int              `json:"timeout_ms,omitempty"`
		Env              map[string]string `json:"env"`
	}{"exec", a.Command, a.WorkingDirectory, a.TimeoutMS, a.Env})
	return b
}

// localShellArguments is the reverse, for the model-facing history.
func localShellArguments(action json.RawMessage) string {
	var a map[string]json.RawMessage
	if json.Unmarshal(action, &a) != nil {
		return string(action)
	}
	delete(a, "type")
	b, _ := json.Marshal(a)
	return string(b)
}
