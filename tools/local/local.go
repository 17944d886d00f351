// Package local offers loom's local tools to requests: the sandboxed
// Python interpreter (what Responses clients ask for as code_interpreter,
// and gpt-oss's built-in python) and the sandboxed shell. It is the engine's
// ToolProvider for those tool types.
//
// Both are off unless an operator turns them on; a request asking for a
// tool that is off gets an error that says so (a 400), never a silent
// fallback.
package local

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/python"
	"github.com/loomgate/loom/tools/shell"
)

// Provider serves the tools of type code_interpreter and shell. A nil
// server means that tool is disabled.
type Provider struct {
	Python *python.Server
	Shell  *shell.Server
	// HowToEnable says, by tool type, how the operator turns a disabled
	// tool on (cmd/loom: "the operator enables it with --enable-python"),
	// for the error a request asking for it gets; empty says nothing.
	HowToEnable map[string]string
}

// disabled is the error for a request asking for a tool that is off.
func (p *Provider) disabled(param, toolType, what string) error {
	msg := what + " is not enabled on this server"
	if how := p.HowToEnable[toolType]; how != "" {
		msg += " (" + how + ")"
	}
	return responses.Errorf(responses.EInvalid, param+".type", "%s", msg)
}

// Handles reports whether typ is a local tool type.
func (p *Provider) Handles(typ string) bool {
	return typ == responses.ToolCodeInterpreter || typ == responses.ToolShell
}

// Servers returns the local tool servers the request asks for, or an
// EInvalid error naming the tool when it is disabled.
func (p *Provider) Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error) {
	var out []tools.Server
	seen := map[string]bool{}
	for i, t := range req.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		switch t.Type {
		case responses.ToolCodeInterpreter:
			if p.Python == nil {
				return nil, p.disabled(param, t.Type, "code_interpreter")
			}
			if !seen[t.Type] {
				out = append(out, p.Python)
			}
		case responses.ToolShell:
			var env struct {
				Environment struct {
					Type string `json:"type"`
				} `json:"environment"`
			}
			json.Unmarshal(t.Raw, &env)
			if env.Environment.Type == "local" {
				return nil, responses.Errorf(responses.EUnsupported, param+".environment", "a shell with a local environment runs on the client; loom runs shell tools in its own sandbox (environment container_auto)")
			}
			if p.Shell == nil {
				return nil, p.disabled(param, t.Type, "the shell tool")
			}
			if !seen[t.Type] {
				out = append(out, p.Shell)
			}
		default:
			continue
		}
		seen[t.Type] = true
	}
	return out, nil
}
