package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// GetOrCreateSecret returns the secret stored under name, storing value
// first if there is none. The insert and the read are one write
// transaction, which SQLite runs one at a time across processes.
func (d *DB) GetOrCreateSecret(ctx context.Context, name string, value []byte) ([]byte, error) {
	var stored []byte
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&stored)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: secret %s: %w", name, err)
	}
	return stored, nil
}
