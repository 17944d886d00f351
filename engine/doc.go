// Package engine runs one response: it resolves the conversation a request
// continues (previous_response_id), drives the upstream model turn by turn
// through a model.Backend, turns what the model writes into output items
// and events with the responses.Builder, and stores the result.
//
// The Engine knows nothing of HTTP: a program that embeds loom can call
// Engine.Run with its own event sink. It consumes a Store (package store
// holds its contract, the values it exchanges and the errors it returns);
// store/sqlite and store/postgres implement it, and store/storetest checks
// that they do.
//
// A request that cannot start (bad input, an unknown model or previous
// response, a function_call_output answering no call) fails before any
// event and stores nothing. Once started, a response always ends with a
// terminal event and, when store is on, is saved, even if the client went
// away (the save runs on a fresh, bounded context).
//
// Besides Run: RunWith continues a conversation a caller holds in memory
// (WebSocket mode's per-lane cache, for store false chains) and takes
// input the client injects while the response runs (an Inbox: WebSocket
// mode's response.inject);
// InputTokens counts a request's input without running it; Compact
// summarises a conversation into a sealed compaction item, which, sent
// back as input, stands in for the turns it replaced. Run compacts too,
// for an input ending with a compaction_trigger (its whole output) or
// past a context_management threshold (before the first turn):
// servercompaction.go. A call of an async tool does not end a response:
// the model reads a provisional output and goes on (async.go).
//
// A streamed response with store on is saved in_progress before its first
// event, under a lease this engine holds (Options.Lease), so any replica
// on the same store can read it while it runs. Maintain, which every
// replica runs, renews this engine's leases, fails any replica's responses
// whose lease ran out (their replica died) with server_error, and applies
// Options.Retention.
//
// A background response (background.go) is stored queued and handed to a
// job engine through the Queue the engine defines (package background
// implements it with River); whichever replica claims the job calls
// RunBackground. Its events are appended to the store as they are built,
// so Follow can replay and then follow them from any replica (woken by an
// EventNotifier where the store has one), and Cancel sets a flag the
// running replica watches.
//
// A response on a conversation (conversations.go) reads the conversation's
// items as its history, holds the conversation while it runs (a second
// response is a 409), and appends its turn when it ends. The
// Conversations API's own operations are methods of the Engine too.
package engine
