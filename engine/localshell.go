package engine

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// The local_shell tool runs on the client, like a function: the model's
// call goes out as a local_shell_call item and the client answers with a
// local_shell_call_output. The model is offered it as a function of this
// name taking the exec action.
const (
	localShellName       = "local_shell"
	itemLocalShellCall   = "local_shell_call"
	itemLocalShellOutput = "local_shell_call_output"
)

var localShellDefinition = tools.Definition{
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

// hasLocalShell reports whether the request offers the local_shell tool.
func hasLocalShell(req *responses.Request) bool {
	for _, t := range req.Tools {
		if t.Type == responses.ToolLocalShell {
			return true
		}
	}
	return false
}
