package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomgate/loom/store"
)

// Options configures a DB. The zero value, and a nil *Options, mean
// defaults.
type Options struct {
	// Logger receives migration and lifecycle messages. Default
	// slog.Default().
	Logger *slog.Logger
	// PoolSize is the most connections the pool opens. Default 16.
	PoolSize int
	// StatementTimeout bounds every statement on the server
	// (statement_timeout). Default 10s; negative means none.
	StatementTimeout time.Duration
}

const (
	defaultPoolSize         = 16
	defaultStatementTimeout = 10 * time.Second
)

// DB is a response store on PostgreSQL. It implements store.Store.
type DB struct {
	conversations
	events
	sizes
	pool *pgxpool.Pool
	log  *slog.Logger
}

var _ store.Store = (*DB)(nil)

// IsURL reports whether s is a PostgreSQL URL (postgres:// or
// postgresql://), the form --store takes for this store.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Redact returns the URL with its password, if any, replaced, for logs and
// errors. A string that does not parse is replaced whole: it could be
// anything.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "postgres://(unparseable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Open connects to the database at rawURL (postgres://...) and brings its
// schema up to date.
func Open(ctx context.Context, rawURL string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PoolSize <= 0 {
		o.PoolSize = defaultPoolSize
	}
	if o.StatementTimeout == 0 {
		o.StatementTimeout = defaultStatementTimeout
	}
	redacted := Redact(rawURL)
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx's parse errors can quote the string; name it redacted.
		return nil, fmt.Errorf("postgres: %s: invalid URL", redacted)
	}
	cfg.MaxConns = int32(o.PoolSize)
	if o.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(o.StatementTimeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open %s: %w", redacted, err)
	}
	d := &DB{pool: pool, log: o.Logger}
	d.share()
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", redacted, err)
	}
	applied, err := migrate(ctx, pool, migrations)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate %s: %w", redacted, err)
	}
	if applied > 0 {
		d.log.Info("postgres store migrated", "url", redacted, "steps", applied, "version", migrations[len(migrations)-1].Version)
	}
	return d, nil
}

// Close closes the pool's connections.
func (d *DB) Close() error {
	d.pool.Close()
	return nil
}

// Ping checks that PostgreSQL answers, on a connection of the pool.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// errNoID is the error of a save of a record without an id.
var errNoID = errors.New("postgres: save: record has no id")

// Pool returns the store's connection pool, for a job engine that keeps
// its tables in the same database (background responses).
func (d *DB) Pool() *pgxpool.Pool { return d.pool }
