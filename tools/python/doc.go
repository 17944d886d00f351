// Package python is loom's code interpreter: model-written Python run in a
// sandboxed, stateful, notebook-like interpreter. It implements
// tools.Server with one tool, "python" — the gpt-oss built-in python
// namespace on the harmony path, a function tool taking {"code": string} on
// the chat path, and what a Responses client asks for as code_interpreter.
//
// Each session (one response) gets its own interpreter process, started at
// the first call and kept for the next ones, so variables, imports and
// files persist between calls. A call that overruns its time limit kills
// the interpreter; the next call starts a fresh one. Cleanup and Close kill
// it and remove the session's work directory.
//
// # Threat model
//
// The code is hostile. It runs under package sandbox: no network, a
// read-only system, a private work directory, its own namespaces and uid,
// and limits on wall time, CPU, memory, processes and output (see the
// sandbox package for what is and is not isolated). Within a session the
// code can do anything the sandbox allows, including corrupting its own
// interpreter or the driver loop; loom treats everything the interpreter
// sends as untrusted (frame sizes are capped, a bad frame kills it). Nothing
// survives the session: not processes, not files.
package python
