// Package postgres is loom's shared response store: an implementation of
// store.Store on PostgreSQL through pgx (pgxpool), so that several loom
// replicas serve any request from one database.
//
// The schema mirrors store/sqlite: one row in responses per response (the
// response object as JSON text, its events as one text value, one line of
// JSON per event, the engine's pending state, the lease of an in-flight
// response) and one row per input or output item in response_items, in
// the order given, so input items page by cursor. The response object is
// kept as text, not jsonb, so it reads back byte for byte.
//
// A save is one network round trip: its statements (the response row, the
// delete of an earlier save's items, one INSERT of all items from arrays)
// go as one pgx.Batch, which PostgreSQL runs as one implicit transaction.
// A read of a response, or of a whole previous_response_id chain (a
// recursive query), is one statement that returns the items as arrays.
//
// The schema is versioned: Open applies the missing steps in one
// transaction under a transaction-level advisory lock, so replicas that
// start together migrate once, the others waiting and then finding the
// schema current. A database written by a newer loom is refused.
//
// A DB is safe for concurrent use.
package postgres
