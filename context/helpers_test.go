package conversation

import (
	"errors"
	"slices"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

func names(defs []tools.Definition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func equalNames(a, b []tools.Definition) bool { return slices.Equal(names(a), names(b)) }

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func responsesTool(name string, desc *string) responses.Tool {
	return responses.Tool{Type: responses.ToolFunction, Name: name, Description: desc, Parameters: []byte(`{"type":"object","properties":{}}`)}
}

func errorsIs(err, target error) bool     { return errors.Is(err, target) }
func errorsAs(err error, target any) bool { return errors.As(err, target) }
