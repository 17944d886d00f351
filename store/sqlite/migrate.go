package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/loomgate/loom/store/internal/records"
)

// A migration is one step of the schema's history (records.Migration).
type migration = records.Migration

// migrations is the schema's history, in order; versions start at 1 and
// increase by one.
var migrations = []migration{
	{
		// Step 1 was rewritten before the schema's first release: events
		// used to be one row each in a response_events table; they are
		// now one column of the response's row (see doc.go). No released
		// database has the old step 1, so it is changed in place rather
		// than followed by a step 2. From the first release on, steps are
		// only ever added.
		Version: 1,
		Name:    "responses, items and events",
		Stmts: []string{
			// The columns beside response are the ones the store or a
			// future query needs without decoding the JSON. events holds
			// the streamed events, each one line of JSON ending in '\n',
			// in sequence order ('' for none); it comes last so that
			// reading the other columns does not walk its overflow pages.
			`CREATE TABLE responses (
				id                   TEXT    NOT NULL PRIMARY KEY,
				previous_response_id TEXT    NOT NULL DEFAULT '',
				created_at           INTEGER NOT NULL,
				status               TEXT    NOT NULL,
				response             TEXT    NOT NULL,
				events               TEXT    NOT NULL DEFAULT ''
			) STRICT`,
			// position keeps the order the items were given in; item_id
			// is only for cursors, so it is not unique (an item may come
			// without an id).
			`CREATE TABLE response_items (
				response_id TEXT    NOT NULL REFERENCES responses (id),
				kind        TEXT    NOT NULL CHECK (kind IN ('input', 'output')),
				position    INTEGER NOT NULL,
				item_id     TEXT    NOT NULL,
				item        TEXT    NOT NULL,
				PRIMARY KEY (response_id, kind, position)
			) STRICT, WITHOUT ROWID`,
			`CREATE INDEX response_items_item_id ON response_items (response_id, kind, item_id)`,
		},
	},
	{
		// The engine's pending state of a response that ended waiting for
		// the client (an MCP server's elicitation answered by the client,
		// issue #5): opaque JSON, '' for none. It is a column of its own,
		// not part of the response object, because clients never see it.
		Version: 2,
		Name:    "pending input state",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN pending TEXT NOT NULL DEFAULT ''`,
		},
	},
	{
		// In-flight responses are rows (issue #9): the replica running
		// one holds a lease on it, renewed by its heartbeat; lease_until
		// is in Unix milliseconds (0: no lease). The partial index finds
		// expired leases without reading finished responses; the
		// created_at index serves retention.
		Version: 3,
		Name:    "leases and retention",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN lease_owner TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE responses ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0`,
			`CREATE INDEX responses_leases ON responses (lease_until) WHERE status = 'in_progress'`,
			`CREATE INDEX responses_created_at ON responses (created_at)`,
		},
	},
	{
		// Background responses (issue #11): a cancel asked for on any
		// replica is a flag the replica running the response watches.
		Version: 4,
		Name:    "cancel flag",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0`,
		},
	},
	{
		// The Conversations API (issue #11).
		Version: 5,
		Name:    "conversations",
		Stmts: []string{
			// busy_response holds the conversation for the response
			// running on it until busy_until (Unix milliseconds), so two
			// responses never interleave their turns.
			`CREATE TABLE conversations (
				id               TEXT    NOT NULL PRIMARY KEY,
				created_at       INTEGER NOT NULL,
				metadata         TEXT    NOT NULL DEFAULT '{}',
				last_response_id TEXT    NOT NULL DEFAULT '',
				busy_response    TEXT    NOT NULL DEFAULT '',
				busy_until       INTEGER NOT NULL DEFAULT 0
			) STRICT`,
			`CREATE TABLE conversation_items (
				conversation_id TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
				position        INTEGER NOT NULL,
				item_id         TEXT    NOT NULL,
				item            TEXT    NOT NULL,
				PRIMARY KEY (conversation_id, position)
			) STRICT, WITHOUT ROWID`,
			`CREATE INDEX conversation_items_item_id ON conversation_items (conversation_id, item_id)`,
		},
	},
	{
		// Tenants and traces (issue #15): the principal that created a
		// response or conversation owns it ('' is the anonymous tenant, and owns every
		// row stored before), and the W3C trace id of the request that
		// created it lets an operator go from a response to its logs and
		// spans and back (the index: find responses by trace id).
		Version: 6,
		Name:    "tenant and trace id",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN tenant TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE responses ADD COLUMN trace_id TEXT NOT NULL DEFAULT ''`,
			`CREATE INDEX responses_trace_id ON responses (trace_id) WHERE trace_id <> ''`,
			`ALTER TABLE conversations ADD COLUMN tenant TEXT NOT NULL DEFAULT ''`,
		},
	},
	{
		// Issue #35. Secrets the replicas share: the default reasoning
		// key, made by the first replica and read by every later one,
		// so that what one seals opens on all, and after a restart. And
		// leases on queued responses too (a claimed background job's,
		// before its run starts), so the sweep's index covers both.
		Version: 7,
		Name:    "secrets, leases of queued responses",
		Stmts: []string{
			`CREATE TABLE secrets (
				name  TEXT NOT NULL PRIMARY KEY,
				value BLOB NOT NULL
			) STRICT`,
			`DROP INDEX responses_leases`,
			`CREATE INDEX responses_leases ON responses (lease_until) WHERE status IN ('queued', 'in_progress')`,
		},
	},
	{
		// Issue #37. The session key a fleet of engines routes a
		// response's turns by: derived for the first response of a chain
		// and copied to each continuation, so that every replica sends a
		// conversation to the engine that holds its prefix.
		Version: 8,
		Name:    "session key",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN session_key TEXT NOT NULL DEFAULT ''`,
		},
	},
	{
		// Issue #40. When each step of a run happened, for the
		// operator's console (store.Record.Timeline): opaque JSON, ''
		// for none. The events carry no time.
		Version: 9,
		Name:    "timeline",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN timeline TEXT NOT NULL DEFAULT ''`,
		},
	},
}

// migrate applies the steps of steps newer than the database's version, all
// in one transaction, so a failed open leaves the database as it was. It
// returns how many steps it applied.
func migrate(ctx context.Context, db *sql.DB, steps []migration) (applied int, err error) {
	// The transaction is a write transaction (IMMEDIATE), so two
	// processes opening the same new file cannot both read version 0 and
	// both try to create the tables.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	applied, err = records.Migrate(ctx, querier{tx}, steps, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, unixepoch())`)
	if err != nil || applied == 0 {
		return 0, err
	}
	// user_version mirrors the table so standard SQLite tools can tell
	// the version without knowing loom's table.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(steps))); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return applied, nil
}

// SchemaVersion reports the highest schema migration recorded in the
// database, for diagnostics.
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	return records.SchemaVersion(ctx, querier{d.db})
}
