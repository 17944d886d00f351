// Package sqlite is loom's embedded response store: an implementation of
// store.Store on SQLite, through the pure-Go driver modernc.org/sqlite, so
// a single loom binary can keep responses without any outside service.
//
// A stored response is two things: one row in responses holding the
// response object as JSON, its streamed events, and the columns the store
// itself needs to look at (id, previous_response_id, created_at, status);
// and its input and output items in response_items, one row per item in
// the order they were given, so that input items can be paged by cursor.
// The events are one column, each event one line of JSON in sequence
// order, so a client can resume a stream with starting_after: Events reads
// the row and skips the lines up to the one asked for. Items and events
// are kept as the JSON the responses package writes, so the store never
// has to understand an item type to keep it.
//
// Saving is on the path of every stored response (it happens before the
// response's last bytes go out), so it is kept to a fixed number of
// statements: the response row with its events, a delete of the items of
// an earlier save, and one multi-row INSERT of the items (one per 32
// items). A row per event would cost a statement per streamed event.
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
// Every write (saves, deletes, lease renewals and sweeps, retention) goes
// through one writer (writer.go): SQLite has one writer at a time, and
// writers on many pooled connections sleep in its busy handler, which
// under load is the p99. Writes queue instead and are committed in groups
// (group commit): one transaction for all the writes waiting at that
// moment, each under a savepoint so a failing one is undone alone, each
// caller answered after the commit, so what a save wrote is visible to
// every reader when it returns. The groups are committed by one goroutine
// of the store's, not on the callers' stacks: SQLite's frames are deep,
// and a request's goroutine keeps the stack it grew for as long as it
// lives (a stream's whole length).
// Every few dozen commits a goroutine of the store's runs a passive WAL
// checkpoint, so that SQLite's automatic one (inside some save's commit)
// is only a backstop.
//
// An in-flight response is a row too: the engine saves it in_progress with
// a lease (owner, expiry in Unix milliseconds) and replaces it when it
// ends; RenewLeases, FailExpiredLeases and DeleteCreatedBefore serve the
// engine's heartbeat, sweep and retention. Chain follows
// previous_response_id with a recursive query.
//
// Open accepts a file path or ":memory:". A file database runs in WAL mode
// with a busy timeout, so readers do not block the writer and another
// process's writer queues instead of failing; write transactions begin
// IMMEDIATE so two writers never deadlock upgrading a read lock. An in-memory database
// lives only as long as its connection, so it is held on exactly one
// connection that every call shares.
//
// A DB is safe for concurrent use.
package sqlite
