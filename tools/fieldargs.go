package tools

import (
	"encoding/json"
	"strings"
)

// fieldArgs follows the arguments of a call whose client sees one string
// of them (the code of a python call, the input of a custom tool call) as
// they stream, and yields that string: the arguments themselves when they
// are raw text (a harmony built-in), else the field's string in a JSON
// object (the function form, {"code": ...}), which is held back until the
// arguments are complete.
type fieldArgs struct {
	field string
	args  string // the model's arguments so far
	mode  int
}

const (
	fieldUndecided = iota // only blanks so far
	fieldRaw              // raw text: streamed as it comes
	fieldHeld             // a JSON object: decoded at the end
	fieldFlushed
)

func (a *fieldArgs) Delta(piece string) string {
	a.args += piece
	switch a.mode {
	case fieldRaw:
		return piece
	case fieldHeld, fieldFlushed:
		return ""
	}
	trimmed := strings.TrimLeft(a.args, " \t\r\n")
	switch {
	case trimmed == "":
		return ""
	case trimmed[0] == '{':
		a.mode = fieldHeld
		return ""
	}
	a.mode = fieldRaw
	return a.args
}

func (a *fieldArgs) Flush() string {
	mode := a.mode
	a.mode = fieldFlushed
	switch mode {
	case fieldUndecided:
		return a.args
	case fieldHeld:
		return fieldOf(a.args, a.field)
	}
	return ""
}

func (a *fieldArgs) Model() string { return a.args }

// fieldOf is the string of complete arguments: the field's string in a
// JSON object, or else the arguments themselves (as tools/python reads
// its code).
func fieldOf(arguments, field string) string {
	var args map[string]json.RawMessage
	if json.Unmarshal([]byte(arguments), &args) != nil {
		return arguments
	}
	var s *string
	if json.Unmarshal(args[field], &s) != nil || s == nil {
		return arguments
	}
	return *s
}
