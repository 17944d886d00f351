package postgres

import (
	"context"
	"fmt"
)

// GetOrCreateSecret returns the secret stored under name, storing value
// first if there is none, in one statement: a concurrent insert of the
// same name waits for the first to commit, then takes the conflict branch,
// whose no-op update returns the stored row (DO NOTHING would return none).
func (d *DB) GetOrCreateSecret(ctx context.Context, name string, value []byte) ([]byte, error) {
	var stored []byte
	err := d.pool.QueryRow(ctx, `INSERT INTO secrets (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = secrets.value
		RETURNING value`, name, value).Scan(&stored)
	if err != nil {
		return nil, fmt.Errorf("postgres: secret %s: %w", name, err)
	}
	return stored, nil
}
