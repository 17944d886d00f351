package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"

	"github.com/loomgate/loom/store/internal/records"
)

// maxItemBatch is the most item rows one INSERT writes; a record with more
// items takes several statements.
const maxItemBatch = 32

// statements are the queries of the hot paths, prepared once so a save or a
// read does not parse SQL again on every call.
type statements struct {
	upsertResponse *sql.Stmt
	deleteResponse *sql.Stmt
	deleteItems    *sql.Stmt
	getResponse    *sql.Stmt
	getEvents      *sql.Stmt
	responseExists *sql.Stmt
	cursorPosition *sql.Stmt
	inputPageAsc   *sql.Stmt
	inputPageDesc  *sql.Stmt
	chain          *sql.Stmt
	renewLeases    *sql.Stmt
	failExpired    *sql.Stmt
	oldResponses   *sql.Stmt

	// insertItems[n] inserts n item rows in one statement. They are
	// prepared on first use (a record has few items, so few sizes are
	// ever needed), under mu.
	mu          sync.Mutex
	insertItems [maxItemBatch + 1]*sql.Stmt
}

func (s *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.upsertResponse, records.UpsertResponse},
		{&s.deleteResponse, `DELETE FROM responses WHERE id = ?`},
		{&s.deleteItems, `DELETE FROM response_items WHERE response_id = ?`},
		// The items come joined as in chain: one statement, one snapshot.
		{&s.getResponse, `SELECT r.previous_response_id, r.created_at, r.status, r.response, r.pending, r.lease_owner, r.lease_until, r.tenant, r.trace_id, r.session_key, r.timeline,
				(SELECT group_concat(item, char(10) ORDER BY position) FROM response_items i
					WHERE i.response_id = r.id AND i.kind = 'input'),
				(SELECT group_concat(item, char(10) ORDER BY position) FROM response_items i
					WHERE i.response_id = r.id AND i.kind = 'output')
			FROM responses r WHERE r.id = ?`},
		{&s.getEvents, `SELECT events FROM responses WHERE id = ?`},
		{&s.responseExists, `SELECT 1 FROM responses WHERE id = ? AND tenant = ?`},
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
		// The chain is followed inside the database: one query however
		// long it is. depth bounds it (and any cycle).
		// Items come as one text per kind, the items' JSON joined by
		// newlines (compact JSON holds none), so that the whole chain is
		// one statement, hence one snapshot, with no transaction.
		{&s.chain, `WITH RECURSIVE chain (id, depth) AS (
				SELECT ?1, 0
				UNION ALL
				SELECT r.previous_response_id, c.depth + 1
				FROM chain c JOIN responses r ON r.id = c.id
				WHERE r.previous_response_id <> '' AND c.depth + 1 < ?2
			)
			SELECT r.id, r.previous_response_id, r.created_at, r.status, r.pending, r.lease_owner, r.lease_until, r.tenant, r.trace_id, r.session_key,
				(SELECT group_concat(item, char(10) ORDER BY position) FROM response_items i
					WHERE i.response_id = r.id AND i.kind = 'input'),
				(SELECT group_concat(item, char(10) ORDER BY position) FROM response_items i
					WHERE i.response_id = r.id AND i.kind = 'output')
			FROM chain c JOIN responses r ON r.id = c.id
			ORDER BY c.depth`},
		{&s.renewLeases, `UPDATE responses SET lease_until = ?1
			WHERE lease_owner = ?2 AND status IN ('queued', 'in_progress') AND id IN (SELECT value FROM json_each(?3))`},
		// The status column and the object's status change together, so
		// GET and the sweeper agree.
		{&s.failExpired, `UPDATE responses
			SET status = 'failed',
				response = json_set(response, '$.status', 'failed', '$.error', json(?2)),
				lease_owner = '', lease_until = 0
			WHERE id IN (SELECT id FROM responses
				WHERE status IN ('queued', 'in_progress') AND lease_until > 0 AND lease_until < ?1
				LIMIT ?3)`},
		{&s.oldResponses, `SELECT id FROM responses WHERE created_at < ? ORDER BY created_at LIMIT ?`},
	} {
		st, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return err
		}
		*p.dst = st
	}
	return nil
}

// insertItemsStmt returns the statement that inserts n (1..maxItemBatch)
// item rows, preparing it on first use. It must not be called inside a
// transaction: an in-memory database has one connection, which the
// transaction holds.
func (s *statements) insertItemsStmt(ctx context.Context, db *sql.DB, n int) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.insertItems[n]; st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, insertItemsQuery(n))
	if err != nil {
		return nil, err
	}
	s.insertItems[n] = st
	return st, nil
}

// insertItemsQuery is an INSERT of n item rows. ?1 is the response id,
// shared by every row; each row then takes the next four parameters (kind,
// position, item_id, item): a bare ? is numbered one past the largest
// number used so far.
func insertItemsQuery(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO response_items (response_id, kind, position, item_id, item) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?1, ?, ?, ?, ?)")
	}
	return b.String()
}

func (s *statements) close() error {
	var errs []error
	sts := []*sql.Stmt{
		s.upsertResponse, s.deleteResponse, s.deleteItems, s.getResponse,
		s.getEvents, s.responseExists, s.cursorPosition,
		s.inputPageAsc, s.inputPageDesc, s.chain,
		s.renewLeases, s.failExpired, s.oldResponses,
	}
	s.mu.Lock()
	sts = append(sts, s.insertItems[:]...)
	s.mu.Unlock()
	for _, st := range sts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
