package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// maxGroup is the most writes one transaction commits together.
const maxGroup = 64

// checkpointEvery is how many commits pass between WAL checkpoints. The
// checkpoint runs on its own goroutine, so no save waits for it.
const checkpointEvery = 256

// A write is one unit of work for the writer: fn runs inside the group's
// transaction, under a savepoint of its own, so a failing write is undone
// alone and the others of its group still commit.
type write struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error
}

// writer is the store's only writer. SQLite allows one writer at a time;
// with writers on many pooled connections, all but one sleep in the busy
// handler, and under load their wake-ups are the p99. Here saves queue on
// a channel instead, and the writer commits all the saves waiting at that
// moment in one transaction (group commit): one WAL append and one
// lock for many saves, each save's caller answered once the commit is
// durable, so what it wrote is visible to every reader when it returns.
type writer struct {
	db         *sql.DB
	queue      chan *write
	stop       chan struct{}
	stopped    chan struct{}
	checkpoint chan struct{} // nil: no checkpointing (in-memory)
	commits    int
}

func newWriter(db *sql.DB, checkpoint bool) *writer {
	w := &writer{db: db, queue: make(chan *write, maxGroup), stop: make(chan struct{}), stopped: make(chan struct{})}
	if checkpoint {
		w.checkpoint = make(chan struct{}, 1)
	}
	go w.loop()
	if checkpoint {
		go w.checkpoints()
	}
	return w
}

// do runs fn in the writer's next transaction and waits for its commit.
func (w *writer) do(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	req := &write{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case w.queue <- req:
	case <-w.stop:
		return errors.New("sqlite: store closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the write is committed or refused by the writer; its
	// result is waited for even if ctx ends, so the caller never returns
	// while its write might still land.
	return <-req.done
}

func (w *writer) loop() {
	defer close(w.stopped)
	group := make([]*write, 0, maxGroup)
	for {
		select {
		case req := <-w.queue:
			group = append(group[:0], req)
		case <-w.stop:
			// Answer whatever is still queued.
			for {
				select {
				case req := <-w.queue:
					req.done <- errors.New("sqlite: store closed")
				default:
					return
				}
			}
		}
	fill:
		for len(group) < maxGroup {
			select {
			case req := <-w.queue:
				group = append(group, req)
			default:
				break fill
			}
		}
		w.commit(group)
	}
}

// commit runs group in one transaction. With several writes each has a
// savepoint: one that fails is rolled back to it and answered with its
// error, and the others commit. A write alone needs none: if it fails,
// the transaction is rolled back (two statements fewer on the path of a
// save when the writer is not busy).
func (w *writer) commit(group []*write) {
	results := make([]error, len(group))
	ctx := context.Background()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		for _, req := range group {
			req.done <- err
		}
		return
	}
	alone := len(group) == 1
	for i, req := range group {
		if err := req.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if !alone {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
				results[i] = err
				continue
			}
		}
		// The write runs on the group's context, not its caller's: SQLite
		// rolls back the whole transaction when a statement in it is
		// interrupted, which would undo the other writes of the group.
		err := req.fn(ctx, tx)
		results[i] = err
		if alone {
			break
		}
		if err != nil {
			if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO w`); rerr != nil {
				results[i] = errors.Join(err, rerr)
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE w`); err != nil && results[i] == nil {
			results[i] = err
		}
	}
	if alone && results[0] != nil {
		tx.Rollback()
	} else if err := tx.Commit(); err != nil {
		for i := range results {
			if results[i] == nil {
				results[i] = fmt.Errorf("commit: %w", err)
			}
		}
	}
	for i, req := range group {
		req.done <- results[i]
	}
	w.commits++
	if w.checkpoint != nil && w.commits%checkpointEvery == 0 {
		select {
		case w.checkpoint <- struct{}{}:
		default: // one is running or already asked for
		}
	}
}

// checkpoints copies the WAL back into the database file when the writer
// asks. Automatic checkpoints are off (see dataSourceName): SQLite would
// run them inside the commit of whichever save crossed the threshold. A
// PASSIVE checkpoint never blocks the writer or readers.
func (w *writer) checkpoints() {
	for {
		select {
		case <-w.stop:
			return
		case <-w.checkpoint:
			w.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

// close stops the writer after it answered every queued write.
func (w *writer) close() {
	close(w.stop)
	<-w.stopped
}
