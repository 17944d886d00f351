package sandbox

import (
	"context"
	"fmt"

	"github.com/loomgate/loom/tools"
)

// Tool is what a sandboxed tool server (python, shell) holds besides its
// own options: the sandbox its sessions run in and the one tool it offers,
// with the tools.Server methods that follow from them. The server embeds
// it and adds Open and Capabilities.
type Tool struct {
	sb  *Sandbox
	def tools.Definition
}

// NewTool returns the Tool of a server that offers def and runs in sb.
func NewTool(sb *Sandbox, def tools.Definition) Tool { return Tool{sb: sb, def: def} }

// ToolOptions checks that a tool server has a sandbox and returns a copy of
// its options, the zero value for nil.
func ToolOptions[T any](tool string, sb *Sandbox, opts *T) (T, error) {
	var o T
	if sb == nil {
		return o, fmt.Errorf("%s: nil sandbox", tool)
	}
	if opts != nil {
		o = *opts
	}
	return o, nil
}

// Sandbox is the sandbox the tool's sessions run in.
func (t *Tool) Sandbox() *Sandbox { return t.sb }

// Name implements tools.Server: the server label is the tool's name.
func (t *Tool) Name() string { return t.def.Name }

// Definition is the tool as offered to the model.
func (t *Tool) Definition() tools.Definition { return t.def }

// Tools implements tools.Server: the one tool.
func (t *Tool) Tools(context.Context) ([]tools.Definition, error) {
	return []tools.Definition{t.def}, nil
}
