package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/loomgate/loom/tools"
)

// Tool is what a sandboxed tool server (python, shell) holds besides its
// own options: the sandbox its sessions run in, the limits of a call and
// the one tool it offers, with the tools.Server methods that follow from
// them. The server embeds it and adds Open and Capabilities.
type Tool struct {
	sb     *Sandbox
	limits Limits
	def    tools.Definition
}

// Limits are what every sandboxed tool bounds one call by, and the logger
// of its failures to clean up. A zero field means the default.
type Limits struct {
	// CallTimeout bounds the wall time of one call. Default
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxOutputBytes caps the output a call keeps (each tool's Options
	// say of what: python's whole output, shell's each command's).
	// Default DefaultMaxOutputBytes.
	MaxOutputBytes int
	// Logger receives failures to clean up. Default the sandbox's.
	Logger *slog.Logger
}

// NewTool returns the Tool of the server name, which runs in sb: its
// limits are limits with the defaults in place of zero fields, and the tool
// it offers is the one define describes for those limits (a description
// or schema can quote them).
func NewTool(name string, sb *Sandbox, limits Limits, define func(Limits) tools.Definition) (Tool, error) {
	if sb == nil {
		return Tool{}, fmt.Errorf("%s: nil sandbox", name)
	}
	if limits.CallTimeout <= 0 {
		limits.CallTimeout = DefaultCallTimeout
	}
	if limits.MaxOutputBytes <= 0 {
		limits.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if limits.Logger == nil {
		limits.Logger = sb.log
	}
	return Tool{sb: sb, limits: limits, def: define(limits)}, nil
}

// Sandbox is the sandbox the tool's sessions run in.
func (t *Tool) Sandbox() *Sandbox { return t.sb }

// Limits are the limits of one call, the defaults filled in.
func (t *Tool) Limits() Limits { return t.limits }

// Name implements tools.Server: the server label is the tool's name.
func (t *Tool) Name() string { return t.def.Name }

// Definition is the tool as offered to the model.
func (t *Tool) Definition() tools.Definition { return t.def }

// Tools implements tools.Server: the one tool.
func (t *Tool) Tools(context.Context) ([]tools.Definition, error) {
	return []tools.Definition{t.def}, nil
}
