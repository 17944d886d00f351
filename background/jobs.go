package background

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/loomgate/loom/store"
)

// queueName is the River queue of background responses.
const queueName = "loom_responses"

// migrationLock is the PostgreSQL advisory lock River's migrations run
// under, the one the store's migrations take, so replicas starting
// together migrate one at a time.
const migrationLock = 0x6c6f6f6d

// Options configure Jobs. nil means the defaults.
type Options struct {
	Logger *slog.Logger
	// Workers is the most background responses this replica runs at
	// once (default 100).
	Workers int
	// PollInterval is how often the replica looks for jobs it was not
	// told of (default 1s, River's own). A job is fetched at once without
	// it: on PostgreSQL every replica is notified of an insert; on SQLite
	// the inserting client, the one replica, wakes its own fetch. The poll
	// only catches what those missed, and each one costs a query: at 50ms,
	// an idle SQLite replica spent 4% of a core polling.
	PollInterval time.Duration
	// OnClaim, when set, is called on this replica's worker for each job
	// its River client claimed, before the run: the moment a replica that
	// dies leaves the job claimed and its response queued. Tests stop a
	// replica there (cmd/loom: LOOM_TEST_HOLD_CLAIMED); it returns when
	// the run may go on.
	OnClaim func(ctx context.Context, job store.BackgroundJob)
}

// Runner runs a claimed background response: *engine.Engine.
type Runner interface {
	RunBackground(ctx context.Context, job store.BackgroundJob) error
}

// Jobs is the job engine of background responses on one store. It
// implements engine.Queue. Create it, hand it to the engine in
// engine.Options.Queue, then Start it with that engine.
type Jobs struct {
	log     *slog.Logger
	insert  func(ctx context.Context, args responseJob) error
	start   func(ctx context.Context) error
	stop    func(ctx context.Context) error
	claimed func(ctx context.Context, before time.Time) ([]string, error)
	onClaim func(ctx context.Context, job store.BackgroundJob)

	mu     sync.Mutex
	runner Runner
}

// responseJob is the River job of one background response.
type responseJob struct {
	store.BackgroundJob
}

func (responseJob) Kind() string { return "loom_background_response" }

// maxAttempts bounds the attempts of a job. A response runs at most once
// (see the package doc): only an attempt that could not lease its response
// fails in a way that makes another worth it; any later one finds the
// response leased or finished and does nothing.
const maxAttempts = 10

// InsertOpts: maxAttempts, on loom's queue.
func (responseJob) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: maxAttempts, Queue: queueName}
}

type worker struct {
	river.WorkerDefaults[responseJob]
	j *Jobs
}

func (w *worker) Work(ctx context.Context, job *river.Job[responseJob]) error {
	w.j.mu.Lock()
	r := w.j.runner
	w.j.mu.Unlock()
	if r == nil {
		return errors.New("background: no runner")
	}
	if w.j.onClaim != nil {
		w.j.onClaim(ctx, job.Args.BackgroundJob)
	}
	bj := job.Args.BackgroundJob
	bj.Attempt = job.Attempt
	return r.RunBackground(ctx, bj)
}

// Timeout: none from River; the engine bounds a response (its Timeout).
func (w *worker) Timeout(*river.Job[responseJob]) time.Duration { return -1 }

// NewPostgres returns the jobs of a PostgreSQL store, given its pool
// (postgres.DB.Pool), after bringing River's tables up to date under the
// store's migration lock.
func NewPostgres(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Jobs, error) {
	driver := riverpgxv5.New(pool)
	// River's steps each run in a transaction of their own (one adds an
	// enum value, which a later statement of the same transaction cannot
	// use), so the lock is a session lock on a connection held meanwhile.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("background: migrate river: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return nil, fmt.Errorf("background: migrate river: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("background: migrate river: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("background: migrate river: %w", err)
	}
	j, err := newJobs(driver, opts, time.Second)
	if err != nil {
		return nil, err
	}
	j.claimed = func(ctx context.Context, before time.Time) ([]string, error) {
		rows, err := pool.Query(ctx, claimedPostgres, queueName, responseJob{}.Kind(), before)
		if err != nil {
			return nil, fmt.Errorf("background: claimed jobs: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("background: claimed jobs: %w", err)
		}
		return ids, nil
	}
	return j, nil
}

// The claimed jobs are read from River's table directly, and only their
// responses' ids: River's JobList would read each job's arguments whole,
// the client's request, for every running job at every sweep. A running
// job's attempted_at is when its current attempt was claimed.
const (
	claimedPostgres = `SELECT args->>'response_id' FROM river_job
		WHERE state = 'running' AND queue = $1 AND kind = $2 AND attempted_at < $3`
	// River keeps SQLite times as UTC text; unixepoch reads them.
	claimedSQLite = `SELECT json_extract(args, '$.response_id') FROM river_job
		WHERE state = 'running' AND queue = ? AND kind = ? AND unixepoch(attempted_at, 'subsec') < ?`
)

// NewSQLite returns the jobs of a SQLite store, given its database handle
// (sqlite.DB.SQL), after bringing River's tables up to date in one
// transaction.
func NewSQLite(ctx context.Context, db *sql.DB, opts *Options) (*Jobs, error) {
	driver := riversqlite.New(db)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("background: migrate river: %w", err)
	}
	defer tx.Rollback()
	if err := migrateTx(ctx, driver, tx); err != nil {
		return nil, fmt.Errorf("background: migrate river: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("background: migrate river: %w", err)
	}
	j, err := newJobs(driver, opts, time.Second)
	if err != nil {
		return nil, err
	}
	j.claimed = func(ctx context.Context, before time.Time) ([]string, error) {
		rows, err := db.QueryContext(ctx, claimedSQLite, queueName, responseJob{}.Kind(), float64(before.UnixMilli())/1000)
		if err != nil {
			return nil, fmt.Errorf("background: claimed jobs: %w", err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, fmt.Errorf("background: claimed jobs: %w", err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("background: claimed jobs: %w", err)
		}
		return ids, nil
	}
	return j, nil
}

func migrateTx[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], tx TTx) error {
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	_, err = m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil)
	return err
}

func newJobs[TTx any](driver riverdriver.Driver[TTx], opts *Options, poll time.Duration) (*Jobs, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Workers <= 0 {
		o.Workers = 100
	}
	if o.PollInterval <= 0 {
		o.PollInterval = poll
	}
	j := &Jobs{log: o.Logger, onClaim: o.OnClaim}
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{j: j})
	client, err := river.NewClient(driver, &river.Config{
		Logger:            o.Logger,
		Queues:            map[string]river.QueueConfig{queueName: {MaxWorkers: o.Workers}},
		Workers:           workers,
		FetchPollInterval: o.PollInterval,
		// River fetches at once when notified of an insert (PostgreSQL),
		// but at most once per cooldown (River's default 100ms).
		FetchCooldown: min(o.PollInterval, 10*time.Millisecond),
		JobTimeout:    -1,
	})
	if err != nil {
		return nil, fmt.Errorf("background: river client: %w", err)
	}
	j.insert = func(ctx context.Context, args responseJob) error {
		_, err := client.Insert(ctx, args, nil)
		return err
	}
	j.start = client.Start
	j.stop = func(ctx context.Context) error {
		// Running responses get until ctx ends to finish; then they are
		// cancelled (and stored cancelled by their runs).
		err := client.Stop(ctx)
		if ctx.Err() != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			err = client.StopAndCancel(sctx)
		}
		return err
	}
	return j, nil
}

// Enqueue stores job for some replica to run.
func (j *Jobs) Enqueue(ctx context.Context, job store.BackgroundJob) error {
	return j.insert(ctx, responseJob{job})
}

// Claimed returns the response ids of the jobs that a replica's River
// client claimed before before and that are still running (in River's
// table: a replica that died holds its jobs running until River's rescuer
// hands them on, an hour later).
func (j *Jobs) Claimed(ctx context.Context, before time.Time) ([]string, error) {
	return j.claimed(ctx, before)
}

// Start starts claiming and running jobs with runner until Stop.
func (j *Jobs) Start(ctx context.Context, runner Runner) error {
	j.mu.Lock()
	j.runner = runner
	j.mu.Unlock()
	return j.start(ctx)
}

// Stop stops claiming jobs and waits for the running ones until ctx ends,
// then cancels those left.
func (j *Jobs) Stop(ctx context.Context) error { return j.stop(ctx) }
