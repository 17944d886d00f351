// Package sqlite is loom's embedded response store: an implementation of
// engine.Store on SQLite, through the pure-Go driver modernc.org/sqlite, so
// a single loom binary can keep responses without any outside service.
//
// A stored response is three things: one row in responses holding the
// response object as JSON plus the columns the store itself needs to look
// at (id, previous_response_id, created_at, status); its input and output
// items in response_items, one row per item in the order they were given;
// and its streamed events in response_events, keyed by sequence number, so
// a client can resume a stream with starting_after. Items and events are
// kept as the JSON the responses package writes, so the store never has to
// understand an item type to keep it.
//
// A response is saved again each time it changes state (in progress,
// completed, cancelled), so SaveResponse replaces the whole record in one
// transaction: a reader sees either the old record or the new one, never a
// mix of the two.
//
// The schema is versioned. Open applies, in one transaction, the migration
// steps the database has not seen yet and records each in
// schema_migrations; opening an up-to-date database changes nothing, and a
// database written by a newer loom is refused rather than misread.
//
// Open accepts a file path or ":memory:". A file database runs in WAL mode
// with a busy timeout, so readers do not block the writer and concurrent
// writers queue instead of failing; write transactions begin IMMEDIATE so
// two writers never deadlock upgrading a read lock. An in-memory database
// lives only as long as its connection, so it is held on exactly one
// connection that every call shares.
//
// A DB is safe for concurrent use.
package sqlite
