// Package records holds what both stores share: the encodings (the events
// of a response as one text value, one line of JSON per event in sequence
// order; items as the JSON the responses package writes) and the SQL the
// two databases run alike, written once over a small driver-neutral
// Querier with $1-style placeholders, which SQLite accepts too: the
// conversation methods (Conversations), the response upsert, the cancel
// flag, the migration runner. Keeping them in one place means a response
// reads back the same from either store, and a fix lands in both.
package records
