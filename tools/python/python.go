package python

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
)

// Name is the server label and the tool name: gpt-oss calls the tool
// "python", and on the chat path loom offers a function of that name.
const Name = "python"

// Defaults for a nil Options or a zero field.
const (
	DefaultCallTimeout    = sandbox.DefaultCallTimeout
	DefaultMaxOutputBytes = sandbox.DefaultMaxOutputBytes
)

// parameters is the function tool's schema on the chat path.
const parameters = `{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`

//go:embed driver.py
var driver string

// Options configure a Server. A nil *Options, or a zero field, means the
// default. The sandbox's own limits (CPU, memory, processes, work
// directories, unsandboxed opt-in) are in sandbox.Options.
type Options struct {
	// Limits bound each call: CallTimeout its wall time (on timeout the
	// interpreter is killed and its state lost), MaxOutputBytes the
	// output it returns (the rest is replaced by a truncation notice).
	sandbox.Limits
	// Python is the interpreter, as seen inside the sandbox (its directory
	// must be among sandbox.Options.ReadOnlyPaths). Default
	// /usr/bin/python3 if it exists, else python3 from PATH.
	Python string
}

// Server offers the python tool. It is safe for concurrent use.
type Server struct {
	sandbox.Tool
	python string // Options.Python, the default filled in
}

var _ tools.Server = (*Server)(nil)

// New returns a Server that runs code in sb.
func New(sb *sandbox.Sandbox, opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	tool, err := sandbox.NewTool(Name, sb, o.Limits, func(l sandbox.Limits) tools.Definition {
		return tools.Definition{Name: Name, Description: Description(l.CallTimeout, sb), Parameters: json.RawMessage(parameters)}
	})
	if err != nil {
		return nil, err
	}
	if o.Python == "" {
		o.Python = "python3"
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			o.Python = "/usr/bin/python3"
		}
	}
	return &Server{Tool: tool, python: o.Python}, nil
}

// Description is the tool's description, in the words gpt-oss was trained
// on, with this server's real time limit, drive and network.
func Description(timeout time.Duration, sb *sandbox.Sandbox) string {
	drive := fmt.Sprintf("The drive at '%s' can be used to save and persist user files.", sb.MountPoint())
	internet := "Internet access for this session is disabled."
	if !sb.Sandboxed() {
		drive = "The current working directory can be used to save and persist user files."
		internet = "Internet access for this session is not restricted."
	}
	return "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. " +
		"This tool should be used for internal reasoning, but not for code that is intended to be visible to the user " +
		"(e.g. when creating plots, tables, or files).\n\n" +
		"When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook " +
		fmt.Sprintf("environment. python will respond with the output of the execution or time out after %.1f seconds. ", timeout.Seconds()) +
		drive + " " + internet
}

// Capabilities implements tools.Server: calls are code_interpreter_call
// items.
func (s *Server) Capabilities() tools.Capabilities {
	return tools.Capabilities{Kind: tools.KindCodeInterpreter}
}

// Open implements tools.Server. It creates the session's work directory;
// the interpreter starts at the first call.
func (s *Server) Open(ctx context.Context) (tools.Session, error) {
	var err error
	ps := &Session{srv: s, turn: make(chan struct{}, 1)}
	if ps.Session, err = s.Sandbox().NewSession(ctx, Name, s.Limits().Logger, ps.stopInterpreter); err != nil {
		return nil, err
	}
	return ps, nil
}

// Code returns the code of a call's arguments: the "code" string of a JSON
// object ({"code": ...}, the chat path's function call), or else the
// arguments themselves (the harmony path sends raw code to python).
func Code(arguments string) string {
	trimmed := strings.TrimSpace(arguments)
	if strings.HasPrefix(trimmed, "{") {
		var args struct {
			Code *string `json:"code"`
		}
		if json.Unmarshal([]byte(trimmed), &args) == nil && args.Code != nil {
			return *args.Code
		}
	}
	return arguments
}
