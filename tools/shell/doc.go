// Package shell runs model-written shell commands in loom's sandbox. It
// implements tools.Server with one tool, "shell", shaped after the OpenAI
// Responses shell tool: the model sends an action (commands, timeout_ms,
// max_output_length), loom runs the commands in order and returns, per
// command, stdout, stderr and an outcome (exit with its code, or timeout) —
// the shell_call / shell_call_output items.
//
// Each session (one response) gets a work directory that keeps its files
// between calls; each command runs in a fresh `bash -c` in its own sandbox,
// so no process and no shell state outlives a command. The client-executed
// local_shell tool is not this package's: its calls go to the client.
//
// # Threat model
//
// The commands are hostile. They run under package sandbox: no network, a
// read-only system, a private work directory, their own namespaces and uid,
// and limits on wall time, CPU, memory, processes and output (see the
// sandbox package for what is and is not isolated). Cleanup and Close kill
// whatever is still running and remove the work directory.
package shell
