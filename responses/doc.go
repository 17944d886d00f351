// Package responses is the OpenAI Responses API as a protocol: the wire
// types of requests, responses, items and streaming events, the validation
// of a request, and the Builder that turns a model's output into events.
//
// It imports nothing of loom's, so a program can use it alone to speak the
// protocol.
//
// # Items and their JSON
//
// Item is a flat union keyed by its Type. Decoding accepts the shorthand
// forms clients send (a message without "type", content as a plain
// string); encoding writes every key the Open Responses schema requires for
// the item's type, so a response validates whatever produced it.
//
// # Events
//
// Every event of a response comes from one Builder. It assigns sequence
// numbers from 0, output and content indexes and item ids, and it enforces
// the order strict clients check: response.created and
// response.in_progress; then for every item output_item.added before its
// deltas and output_item.done after them; then exactly one of
// response.completed, response.incomplete or response.failed (after an
// error event). Both upstream backends feed the same Builder, so neither
// can get the order wrong on its own.
//
// # Dialects
//
// OpenAI's SDKs and the Open Responses specification disagree on a few
// names: reasoning text streams as response.reasoning_text.* in the first
// and response.reasoning.* in the second, which also wants non-standard
// item and event types prefixed with a vendor name ("loom:"). Events are
// built in the OpenAI naming and renamed only when written (Dialect), so
// stored events can be replayed in either.
package responses
