package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/internal/records"
)

// RenewLeases moves the lease expiry of owner's queued or in-progress
// responses ids to until.
func (d *DB) RenewLeases(ctx context.Context, owner string, ids []string, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, d.st.renewLeases).ExecContext(ctx, until.UnixMilli(), owner, string(list))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: renew leases of %s: %w", owner, err)
	}
	return nil
}

// FailExpiredLeases marks failed up to limit queued or in-progress
// responses whose lease ran out before now.
func (d *DB) FailExpiredLeases(ctx context.Context, now time.Time, errorObject json.RawMessage, limit int) (int, error) {
	var n int64
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, d.st.failExpired).ExecContext(ctx, now.UnixMilli(), string(errorObject), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: fail expired leases: %w", err)
	}
	return int(n), nil
}

// ClaimQueued leases queued response id to owner until until, unless it
// is leased already, and reports whether it did.
func (d *DB) ClaimQueued(ctx context.Context, id, owner string, until time.Time) (bool, error) {
	var claimed bool
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE responses SET lease_owner = ?, lease_until = ?
			WHERE id = ? AND status = 'queued' AND lease_owner = ''`, owner, until.UnixMilli(), id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			claimed = true
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM responses WHERE id = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return false, records.Wrap(err, "sqlite: claim %s", id)
	}
	return claimed, nil
}

// FailUnleasedQueued marks failed those of ids that are queued and not
// leased.
func (d *DB) FailUnleasedQueued(ctx context.Context, ids []string, errorObject json.RawMessage) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	var n int64
	err = d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE responses
			SET status = 'failed',
				response = json_set(response, '$.status', 'failed', '$.error', json(?2))
			WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'queued' AND lease_owner = ''`,
			string(list), string(errorObject))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: fail unleased queued responses: %w", err)
	}
	return int(n), nil
}

// DeleteCreatedBefore removes up to limit responses created before before
// (Unix seconds), oldest first, with their items and events.
func (d *DB) DeleteCreatedBefore(ctx context.Context, before int64, limit int) (int, error) {
	n := 0
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.StmtContext(ctx, d.st.oldResponses).QueryContext(ctx, before, limit)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := deleteResponse(ctx, tx, &d.st, id); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete responses created before %d: %w", before, err)
	}
	return n, nil
}
