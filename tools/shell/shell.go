package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
)

// Name is the server label and the tool name.
const Name = "shell"

// Defaults for a nil Options or a zero field.
const (
	DefaultCallTimeout    = sandbox.DefaultCallTimeout
	DefaultMaxOutputBytes = sandbox.DefaultMaxOutputBytes
	DefaultShell          = "bash"
)

// Options configure a Server. A nil *Options, or a zero field, means the
// default. The sandbox's own limits are in sandbox.Options.
type Options struct {
	// Limits bound each call: CallTimeout the wall time of all its
	// commands together, MaxOutputBytes the stdout and stderr kept for
	// each command, together. The model's timeout_ms and
	// max_output_length can lower them, not raise them.
	sandbox.Limits
	// Shell runs each command as Shell -c command. Default bash.
	Shell string
}

// Server offers the shell tool. It is safe for concurrent use.
type Server struct {
	sandbox.Tool
	shell string // Options.Shell, the default filled in
}

var _ tools.Server = (*Server)(nil)

// New returns a Server that runs commands in sb.
func New(sb *sandbox.Sandbox, opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	tool, err := sandbox.NewTool(Name, sb, o.Limits, func(l sandbox.Limits) tools.Definition {
		return tools.Definition{Name: Name, Description: description(sb, o.Shell, l), Parameters: parameters(l)}
	})
	if err != nil {
		return nil, err
	}
	return &Server{Tool: tool, shell: o.Shell}, nil
}

func description(sb *sandbox.Sandbox, shell string, l sandbox.Limits) string {
	where := fmt.Sprintf("a sandboxed Linux environment without network access. The working directory is %s; "+
		"its files persist across calls for the rest of this conversation turn. Everything else is read-only, except /tmp.",
		sb.MountPoint())
	if !sb.Sandboxed() {
		where = "the server's environment. The working directory's files persist across calls for the rest of this conversation turn."
	}
	return "Runs shell commands in " + where +
		fmt.Sprintf(" The commands run one after another, each with `%s -c` in a new process (no shell state carries over). ", shell) +
		fmt.Sprintf("All of them together must finish within %s. ", l.CallTimeout) +
		"The result is JSON: for each command run, its stdout, stderr and outcome " +
		`({"type":"exit","exit_code":N} or {"type":"timeout"}).`
}

func parameters(l sandbox.Limits) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
		`"commands":{"type":"array","items":{"type":"string"},"description":"Shell commands to run, in order."},`+
		`"timeout_ms":{"type":"integer","description":"Wall-clock limit for all the commands, in milliseconds (at most %d)."},`+
		`"max_output_length":{"type":"integer","description":"Maximum bytes of stdout and stderr kept for each command (at most %d)."}},`+
		`"required":["commands"]}`, l.CallTimeout.Milliseconds(), l.MaxOutputBytes))
}

// Capabilities implements tools.Server: calls are shell_call items,
// reported once they ran.
func (s *Server) Capabilities() tools.Capabilities {
	return tools.Capabilities{Kind: tools.KindShell}
}

// Open implements tools.Server: it creates the session's work directory.
func (s *Server) Open(ctx context.Context) (tools.Session, error) {
	ss, err := s.Sandbox().NewSession(ctx, Name, s.Tool.Limits().Logger, nil)
	if err != nil {
		return nil, err
	}
	return &Session{Session: ss, srv: s}, nil
}

// Action is what the model asks to run: the action of a shell_call item.
type Action struct {
	Commands []string `json:"commands"`
	// TimeoutMs and MaxOutputLength are the model's, if it gave them.
	TimeoutMs       *int64 `json:"timeout_ms,omitempty"`
	MaxOutputLength *int64 `json:"max_output_length,omitempty"`
}

// ArgumentError reports arguments the tool cannot run.
type ArgumentError struct{ Reason string }

func (e *ArgumentError) Error() string { return "shell: " + e.Reason }

// ParseAction reads a call's arguments: {"commands": [...], "timeout_ms":
// N, "max_output_length": N}, as the Responses shell tool's action. A
// single {"command": "..."} string is accepted too.
func ParseAction(arguments string) (Action, error) {
	var raw struct {
		Action
		Command *string `json:"command"`
	}
	if err := json.Unmarshal([]byte(arguments), &raw); err != nil {
		return Action{}, &ArgumentError{Reason: `arguments must be a JSON object {"commands": ["..."]}: ` + err.Error()}
	}
	a := raw.Action
	if len(a.Commands) == 0 && raw.Command != nil {
		a.Commands = []string{*raw.Command}
	}
	if len(a.Commands) == 0 {
		return Action{}, &ArgumentError{Reason: `"commands" must list at least one command`}
	}
	for _, c := range a.Commands {
		if strings.TrimSpace(c) == "" {
			return Action{}, &ArgumentError{Reason: "a command is empty"}
		}
	}
	return a, nil
}

// Limits returns the time limit and per-command output cap for a: the
// model's values, never above the server's.
func (s *Server) Limits(a Action) (time.Duration, int) {
	server := s.Tool.Limits()
	timeout, maxOut := server.CallTimeout, server.MaxOutputBytes
	if a.TimeoutMs != nil && *a.TimeoutMs > 0 && time.Duration(*a.TimeoutMs)*time.Millisecond < timeout {
		timeout = time.Duration(*a.TimeoutMs) * time.Millisecond
	}
	if a.MaxOutputLength != nil && *a.MaxOutputLength > 0 && *a.MaxOutputLength < int64(maxOut) {
		maxOut = int(*a.MaxOutputLength)
	}
	return timeout, maxOut
}
