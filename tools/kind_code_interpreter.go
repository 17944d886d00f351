package tools

import (
	"encoding/json"
	"strings"

	"github.com/loomgate/loom/responses"
)

// KindCodeInterpreter is the local Python interpreter's calls:
// code_interpreter_call items whose code streams as the model writes it,
// and whose output is the interpreter's logs. The model calls it as the
// python function (its harmony built-in on a completions backend).
var KindCodeInterpreter = Register(&Kind{
	ItemType:     responses.ItemCodeInterpreterCall,
	NewArguments: func() Arguments { return &codeArgs{} },
	Output: func(res Result, text string) (json.RawMessage, string) {
		out, _ := json.Marshal([]map[string]string{{"type": "logs", "logs": text}})
		return out, ""
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemCodeInterpreterCall: func(it responses.Item) []responses.Item {
			code := ""
			if it.Code != nil {
				code = *it.Code
			}
			var logs []struct {
				Logs string `json:"logs"`
			}
			json.Unmarshal(it.Outputs, &logs)
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

// codeArgs follows the arguments of a python call as they stream and
// yields its code: the arguments themselves when they are raw code (the
// harmony built-in), else the "code" string of a JSON object (the chat
// path's function {"code": ...}), which is held back until the arguments
// are complete.
type codeArgs struct {
	args string // the model's arguments so far
	mode int
}

const (
	codeUndecided = iota // only blanks so far
	codeRaw              // raw code: streamed as it comes
	codeHeld             // a JSON object: decoded at the end
	codeFlushed
)

func (a *codeArgs) Delta(piece string) string {
	a.args += piece
	switch a.mode {
	case codeRaw:
		return piece
	case codeHeld, codeFlushed:
		return ""
	}
	trimmed := strings.TrimLeft(a.args, " \t\r\n")
	switch {
	case trimmed == "":
		return ""
	case trimmed[0] == '{':
		a.mode = codeHeld
		return ""
	}
	a.mode = codeRaw
	return a.args
}

func (a *codeArgs) Flush() string {
	mode := a.mode
	a.mode = codeFlushed
	switch mode {
	case codeUndecided:
		return a.args
	case codeHeld:
		return codeOf(a.args)
	}
	return ""
}

func (a *codeArgs) Model() string { return a.args }

// codeOf is the code of complete python arguments: the "code" string of a
// JSON object, or else the arguments themselves (as tools/python reads
// them).
func codeOf(arguments string) string {
	var args struct {
		Code *string `json:"code"`
	}
	if json.Unmarshal([]byte(arguments), &args) == nil && args.Code != nil {
		return *args.Code
	}
	return arguments
}
