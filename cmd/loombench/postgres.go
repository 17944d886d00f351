package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// createDatabase creates a database of its own for the run on the
// PostgreSQL server at serverURL, and returns its URL and what drops it.
func createDatabase(ctx context.Context, serverURL string) (string, func() error, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("postgres URL: %w", err)
	}
	name := fmt.Sprintf("loombench_%d", time.Now().UnixNano())
	exec := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("postgres: create the run's database: %w", err)
	}
	drop := func() error {
		// The run's context may have ended; the database goes anyway.
		if err := exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("postgres: drop database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
