package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loomgate/loom/store/internal/records"
)

// A migration is one step of the schema's history (records.Migration).
type migration = records.Migration

// migrationLock is the advisory lock key that serialises migrations of
// every loom replica on one database (an arbitrary constant: "loom" in
// ASCII).
const migrationLock = 0x6c6f6f6d

var migrations = []migration{
	{
		Version: 1,
		Name:    "responses, items, events, pending input, leases",
		Stmts: []string{
			// lease_until is Unix milliseconds, 0 for no lease.
			`CREATE TABLE responses (
				id                   text   NOT NULL PRIMARY KEY,
				previous_response_id text   NOT NULL DEFAULT '',
				created_at           bigint NOT NULL,
				status               text   NOT NULL,
				response             text   NOT NULL,
				pending              text   NOT NULL DEFAULT '',
				lease_owner          text   NOT NULL DEFAULT '',
				lease_until          bigint NOT NULL DEFAULT 0,
				events               text   NOT NULL DEFAULT ''
			)`,
			`CREATE TABLE response_items (
				response_id text    NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
				kind        text    NOT NULL CHECK (kind IN ('input', 'output')),
				position    integer NOT NULL,
				item_id     text    NOT NULL,
				item        text    NOT NULL,
				PRIMARY KEY (response_id, kind, position)
			)`,
			`CREATE INDEX response_items_item_id ON response_items (response_id, kind, item_id)`,
			`CREATE INDEX responses_leases ON responses (lease_until) WHERE status = 'in_progress'`,
			`CREATE INDEX responses_created_at ON responses (created_at)`,
		},
	},
	{
		// Background responses (issue #11): a cancel asked for on any
		// replica is a flag the replica running the response watches.
		Version: 2,
		Name:    "cancel flag",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false`,
		},
	},
	{
		// The Conversations API (issue #11).
		Version: 3,
		Name:    "conversations",
		Stmts: []string{
			`CREATE TABLE conversations (
				id               text   NOT NULL PRIMARY KEY,
				created_at       bigint NOT NULL,
				metadata         text   NOT NULL DEFAULT '{}',
				last_response_id text   NOT NULL DEFAULT '',
				busy_response    text   NOT NULL DEFAULT '',
				busy_until       bigint NOT NULL DEFAULT 0
			)`,
			`CREATE TABLE conversation_items (
				conversation_id text    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
				position        integer NOT NULL,
				item_id         text    NOT NULL,
				item            text    NOT NULL,
				PRIMARY KEY (conversation_id, position)
			)`,
			`CREATE INDEX conversation_items_item_id ON conversation_items (conversation_id, item_id)`,
		},
	},
	{
		// Tenants and traces (issue #15): the principal that created a
		// response or conversation owns it ('' is the anonymous tenant, and owns every
		// row stored before); the W3C trace id of the request that
		// created it is indexed, for operators going from a trace to its
		// responses.
		Version: 4,
		Name:    "tenant and trace id",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN tenant text NOT NULL DEFAULT ''`,
			`ALTER TABLE responses ADD COLUMN trace_id text NOT NULL DEFAULT ''`,
			`CREATE INDEX responses_trace_id ON responses (trace_id) WHERE trace_id <> ''`,
			`ALTER TABLE conversations ADD COLUMN tenant text NOT NULL DEFAULT ''`,
		},
	},
	{
		// Issue #35. Secrets the replicas share: the default reasoning
		// key, made by the first replica and read by every later one,
		// so that what one seals opens on all, and after a restart. And
		// leases on queued responses too (a claimed background job's,
		// before its run starts), so the sweep's index covers both.
		Version: 5,
		Name:    "secrets, leases of queued responses",
		Stmts: []string{
			`CREATE TABLE secrets (
				name  text  NOT NULL PRIMARY KEY,
				value bytea NOT NULL
			)`,
			`DROP INDEX responses_leases`,
			`CREATE INDEX responses_leases ON responses (lease_until) WHERE status IN ('queued', 'in_progress')`,
		},
	},
	{
		// Issue #37. The session key a fleet of engines routes a
		// response's turns by: derived for the first response of a chain
		// and copied to each continuation, so that every replica sends a
		// conversation to the engine that holds its prefix.
		Version: 6,
		Name:    "session key",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN session_key text NOT NULL DEFAULT ''`,
		},
	},
	{
		// Issue #40. When each step of a run happened, for the
		// operator's console (store.Record.Timeline): opaque JSON, ''
		// for none. The events carry no time.
		Version: 7,
		Name:    "timeline",
		Stmts: []string{
			`ALTER TABLE responses ADD COLUMN timeline text NOT NULL DEFAULT ''`,
		},
	},
}

// migrate applies the steps newer than the database's version in one
// transaction, holding the migration lock, and returns how many it
// applied.
func migrate(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}, steps []migration) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	// Released at commit or rollback; replicas starting together queue
	// here, and the later ones find nothing left to do.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return 0, err
	}
	applied, err := records.Migrate(ctx, querier{tx}, steps, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     NOT NULL PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`)
	if err != nil {
		return 0, err
	}
	return applied, tx.Commit(ctx)
}

// SchemaVersion reports the highest schema migration recorded.
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	return records.SchemaVersion(ctx, querier{d.pool})
}
