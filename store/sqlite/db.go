package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	// The pure-Go driver registers itself as "sqlite".
	_ "modernc.org/sqlite"

	"github.com/loomgate/loom/store"
)

// Memory is the path that opens a private in-memory database.
const Memory = ":memory:"

// defaultBusyTimeout is how long a connection waits for another one's lock
// before giving up with SQLITE_BUSY. Writes here are short transactions, so
// a few seconds only runs out when something is truly stuck.
const defaultBusyTimeout = 5 * time.Second

// Options configures a DB. The zero value, and a nil *Options, mean
// defaults.
type Options struct {
	// Logger receives migration and lifecycle messages. Default
	// slog.Default().
	Logger *slog.Logger
	// BusyTimeout bounds the wait for a lock held by another connection
	// or process (file databases only). Default 5s.
	BusyTimeout time.Duration
}

// DB is a response store backed by SQLite. It implements store.Store.
type DB struct {
	conversations
	events
	sizes
	db  *sql.DB
	log *slog.Logger
	st  statements
	w   *writer // every write goes through it

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*DB)(nil)

// Open opens (creating if needed) the database at path, or a private
// in-memory database for ":memory:", and brings its schema up to date.
func Open(ctx context.Context, path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = defaultBusyTimeout
	}

	dsn, err := dataSourceName(path, o.BusyTimeout)
	if err != nil {
		return nil, err
	}
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if path == Memory {
		// Each connection to ":memory:" is its own empty database, and
		// closing the last one discards it. One connection, never
		// recycled, makes every call see the same data.
		sqldb.SetMaxOpenConns(1)
		sqldb.SetMaxIdleConns(1)
		sqldb.SetConnMaxLifetime(0)
		sqldb.SetConnMaxIdleTime(0)
	}

	d := &DB{db: sqldb, log: o.Logger}
	if err := d.init(ctx, path); err != nil {
		sqldb.Close()
		return nil, err
	}
	return d, nil
}

func (d *DB) init(ctx context.Context, path string) error {
	// Ping first so a bad path fails here, with the path in the error,
	// rather than inside the first migration.
	if err := d.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	applied, err := migrate(ctx, d.db, migrations)
	if err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", path, err)
	}
	if applied > 0 {
		d.log.Info("sqlite store migrated", "path", path, "steps", applied, "version", migrations[len(migrations)-1].Version)
	}
	if err := d.st.prepare(ctx, d.db); err != nil {
		d.st.close()
		return fmt.Errorf("sqlite: prepare statements: %w", err)
	}
	d.w = newWriter(d.db, path != Memory)
	d.share()
	return nil
}

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// Close releases the database. An in-memory database is gone afterwards.
// Closing again returns what the first Close did.
func (d *DB) Close() error {
	d.closeOnce.Do(func() {
		d.w.close()
		d.closeErr = errors.Join(d.st.close(), d.db.Close())
	})
	return d.closeErr
}

// dataSourceName builds the driver DSN. Settings go in the DSN rather than
// in statements after Open because database/sql opens connections on its
// own, and each new one must get them too.
func dataSourceName(path string, busy time.Duration) (string, error) {
	if path == "" {
		return "", errors.New("sqlite: empty path")
	}
	if path == Memory {
		return Memory + "?_pragma=foreign_keys(1)&_txlock=immediate", nil
	}
	// The driver splits the path from its parameters at the first '?'.
	if strings.ContainsRune(path, '?') {
		return "", fmt.Errorf("sqlite: path %q must not contain '?'", path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// WAL with synchronous=NORMAL cannot corrupt the database; at worst a
	// power loss forgets the last commits, which for a response cache is
	// the right trade for not syncing on every save.
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// Automatic checkpoints stay on (every 1000 WAL pages, inside the
	// commit that crosses the threshold) as a backstop only: the writer
	// asks for passive checkpoints on a goroutine of its own well before
	// that (see writer.go). Turning them off in the DSN
	// (wal_autocheckpoint(0)) left every checkpoint busy with this driver,
	// and the WAL grew without bound.
	// Writes begin IMMEDIATE: a deferred transaction that reads and then
	// writes can find another writer got there first and fail at once
	// with SQLITE_BUSY, which the busy timeout cannot help with.
	// Read-only transactions stay deferred (the driver ignores _txlock
	// for them), so readers never take the write lock.
	q.Set("_txlock", "immediate")
	return path + "?" + q.Encode(), nil
}

// SQL returns the store's database handle, for a job engine that keeps its
// tables in the same database (background responses). For ":memory:" it is
// the only way to reach the same data.
func (d *DB) SQL() *sql.DB { return d.db }
