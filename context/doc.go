// Package conversation holds the per-response conversation context: the
// history, the tools offered to the model, the tool sessions opened and the
// tools called, and the end-of-response cleanup of those sessions. (The
// folder is context/; the package is named conversation so that it does not
// shadow the standard context package.)
//
// There is one implementation, used by every backend (chat completions and
// harmony alike): the lifecycle below is written once, so a fix cannot land
// in one copy and miss another.
//
// # Lifecycle
//
// The Engine creates a Context per response with New, from a
// *tools.Registry of what the request may use, and defers Close at once:
//
//	cc := conversation.New(reg, history, &conversation.Options{ResponseID: id})
//	defer cc.Close(ctx)
//
// Init lists the servers' tools and fixes what is offered (Offered). A
// request with no tools does no tool work: nothing is listed, nothing
// opened, Offered is empty, and Close has nothing to do. Init is
// idempotent.
//
// In the model loop, a turn's calls to server tools (IsServerTool) go to
// Call. A server's session is opened lazily, the first time one of its
// tools is called, and is reused by later calls; offering a tool never opens
// anything. The calls of a turn run concurrently, bounded, and their results
// come back in call order; any failure, including a panic, is a result the
// model can read, never a crash. If a session cannot be opened, that call
// fails with a clear error result and the sessions already open are
// unaffected.
//
// Close runs on every exit, on a context of its own (the request's may be
// cancelled) bounded by its own timeouts. It has two phases, and the second
// begins only after the first has returned:
//
//  1. one cleanup pass over the sessions whose tools were called, each sent
//     exactly one Cleanup, concurrently with a bound, each with a timeout
//     and the pass with an overall deadline;
//  2. every opened session closed, in reverse order of opening.
//
// So a cleanup request always reaches a live session, a session never
// called is never cleaned up, and a session never opened is never touched.
// The order is guaranteed by Close's structure, two sequential steps in
// one function, not by the order in which callbacks were registered on some
// exit stack. Calling Close again does nothing more.
//
// # Failures
//
// Every failed operation on a session (listing, opening, calling, cleaning
// up, closing), whether it returned an error, hung past its timeout or
// panicked, is logged with the response id, server, tools and error,
// counted in Stats and in Options.Metrics, and returned as a *SessionError
// (joined, for Close). None is swallowed and none stops the others. An
// operation that ignores its context is abandoned at its timeout, not waited
// for; the session is closed after it regardless.
package conversation
