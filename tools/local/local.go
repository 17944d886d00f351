// Package local offers loom's local tools to requests: the sandboxed
// Python interpreter (what Responses clients ask for as code_interpreter,
// and gpt-oss's built-in python) and the sandboxed shell. It is the engine's
// ToolProvider for those tool types.
//
// Both are off unless an operator turns them on; a request asking for a
// tool that is off gets a 400 that says so, never a silent fallback.
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
}

// Handles reports whether typ is a local tool type.
func (p *Provider) Handles(typ string) bool {
	return typ == responses.ToolCodeInterpreter || typ == responses.ToolShell
}

// Servers returns the local tool servers the request asks for, or a 400
// naming the tool when it is disabled.
func (p *Provider) Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error) {
	var out []tools.Server
	seen := map[string]bool{}
	for i, t := range req.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		switch t.Type {
		case responses.ToolCodeInterpreter:
			if p.Python == nil {
				return nil, responses.BadRequest(param+".type", "code_interpreter is not enabled on this server (the operator enables it with --enable-python)")
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
				return nil, responses.Unsupported(param+".environment", "a shell with a local environment runs on the client; loom runs shell tools in its own sandbox (environment container_auto)")
			}
			if p.Shell == nil {
				return nil, responses.BadRequest(param+".type", "the shell tool is not enabled on this server (the operator enables it with --enable-shell)")
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
