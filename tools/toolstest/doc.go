// Package toolstest helps test tools.Server implementations and the code
// that runs them.
//
// Run is the conformance suite of tools.Server, in the manner of
// store/storetest: each implementation's tests (mcp, python, shell,
// websearch, toolsearch) call it with a function that builds a fresh
// server, and Run checks what the interface promises: a stable name and
// tool list, capabilities that are declared consistently and whose kind
// can report a call's result, a call of a listed tool, an unlisted tool
// refused, safety for concurrent sessions and calls, a session whose life
// does not end with Open's context, calls that end when their context
// does or when the session closes, and Cleanup and Close in the lifecycle
// order, with ErrClosed afterwards.
//
// Server is a tools.Server for tests of code that runs tools: its
// behaviour is set by function fields, and it records, in order,
// everything it was asked to do.
package toolstest
