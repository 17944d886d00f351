package sqlite

import (
	"context"
	"database/sql"
	"errors"
)

// statements are the queries of the hot paths, prepared once at open so a
// save or a read does not parse SQL again on every call.
type statements struct {
	upsertResponse *sql.Stmt
	deleteResponse *sql.Stmt
	deleteItems    *sql.Stmt
	deleteEvents   *sql.Stmt
	insertItem     *sql.Stmt
	insertEvent    *sql.Stmt
	getResponse    *sql.Stmt
	getItems       *sql.Stmt
	responseExists *sql.Stmt
	cursorPosition *sql.Stmt
	inputPageAsc   *sql.Stmt
	inputPageDesc  *sql.Stmt
	eventsAfter    *sql.Stmt
}

func (s *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		// An upsert rather than INSERT OR REPLACE: REPLACE deletes the
		// row first, which the foreign keys of the old items forbid.
		{&s.upsertResponse, `INSERT INTO responses (id, previous_response_id, created_at, status, response)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				previous_response_id = excluded.previous_response_id,
				created_at = excluded.created_at,
				status = excluded.status,
				response = excluded.response`},
		{&s.deleteResponse, `DELETE FROM responses WHERE id = ?`},
		{&s.deleteItems, `DELETE FROM response_items WHERE response_id = ?`},
		{&s.deleteEvents, `DELETE FROM response_events WHERE response_id = ?`},
		{&s.insertItem, `INSERT INTO response_items (response_id, kind, position, item_id, item) VALUES (?, ?, ?, ?, ?)`},
		{&s.insertEvent, `INSERT INTO response_events (response_id, seq, event) VALUES (?, ?, ?)`},
		{&s.getResponse, `SELECT previous_response_id, created_at, status, response FROM responses WHERE id = ?`},
		// 'input' sorts before 'output', so inputs come first.
		{&s.getItems, `SELECT kind, item FROM response_items WHERE response_id = ? ORDER BY kind, position`},
		{&s.responseExists, `SELECT 1 FROM responses WHERE id = ?`},
		// Should an id appear twice, the cursor is its first occurrence.
		{&s.cursorPosition, `SELECT position FROM response_items
			WHERE response_id = ? AND kind = 'input' AND item_id = ?
			ORDER BY position LIMIT 1`},
		{&s.inputPageAsc, `SELECT item FROM response_items
			WHERE response_id = ? AND kind = 'input' AND position > ?
			ORDER BY position LIMIT ?`},
		{&s.inputPageDesc, `SELECT item FROM response_items
			WHERE response_id = ? AND kind = 'input' AND position < ?
			ORDER BY position DESC LIMIT ?`},
		{&s.eventsAfter, `SELECT event FROM response_events WHERE response_id = ? AND seq > ? ORDER BY seq`},
	} {
		st, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return err
		}
		*p.dst = st
	}
	return nil
}

func (s *statements) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{
		s.upsertResponse, s.deleteResponse, s.deleteItems, s.deleteEvents,
		s.insertItem, s.insertEvent, s.getResponse, s.getItems,
		s.responseExists, s.cursorPosition, s.inputPageAsc, s.inputPageDesc,
		s.eventsAfter,
	} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
