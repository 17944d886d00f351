package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// maxGroup is the most writes one transaction commits together.
const maxGroup = 64

// checkpointEvery is how many commits pass between WAL checkpoints. The
// checkpoint runs on its own goroutine, so no save waits for it. A save
// appends about ten pages to the WAL, so 32 commits stay well under the
// 1000 pages at which SQLite would checkpoint inside a commit.
const checkpointEvery = 32

// A write is one unit of work for the writer: fn runs inside the group's
// transaction, under a savepoint of its own, so a failing write is undone
// alone and the others of its group still commit.
type write struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error
}

// writer makes the store's writes one at a time. SQLite allows one writer
// at a time; with writers on many pooled connections, all but one sleep
// in the busy handler, and under load their wake-ups are the p99. Here
// writes queue instead, and the queue is committed in groups (group
// commit): one transaction, one WAL append and one lock for all the writes
// waiting at that moment, each caller answered once the commit is done, so
// what it wrote is visible to every reader when it returns.
//
// The groups are committed by one goroutine of the store's, not by the
// callers: SQLite's engine (modernc's translation of its C) runs a commit
// through frames of several kilobytes, and a caller that committed itself
// would keep the stack that grew for it for as long as it lives, which for
// a streaming request is the whole stream. The hand-off is a channel send to a goroutine
// that is parked waiting for it.
type writer struct {
	db     *sql.DB
	mu     sync.Mutex
	queue  []*write // under mu
	closed bool     // under mu: no write is queued any more

	wake       chan struct{} // a write was queued (capacity 1)
	stop       chan struct{} // closed by close, after closed is set
	stopped    chan struct{} // closed when the commit loop has ended
	checkpoint chan struct{} // nil: no checkpointing (in-memory)
	checked    chan struct{} // closed when the checkpoints have stopped
	commits    int           // the commit loop's own
}

func newWriter(db *sql.DB, checkpoint bool) *writer {
	w := &writer{db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		stopped: make(chan struct{}), checked: make(chan struct{})}
	if checkpoint {
		w.checkpoint = make(chan struct{}, 1)
		go w.checkpoints()
	} else {
		close(w.checked)
	}
	go w.commitLoop()
	return w
}

// errClosed is the error of a write after Close.
var errClosed = errors.New("sqlite: store closed")

// do runs fn in a group transaction and returns once it is committed (or
// refused). Once queued, the write is waited for even if ctx ends, so the
// caller never returns while it might still land; a write whose ctx ended
// before its group began is not run.
func (w *writer) do(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &write{ctx: ctx, fn: fn, done: make(chan error, 1)}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	w.queue = append(w.queue, req)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // the loop is already woken, and takes the whole queue
	}
	return <-req.done
}

// commitLoop commits the queue, a group at a time, whenever it is woken,
// until close; it empties the queue before it ends.
func (w *writer) commitLoop() {
	defer close(w.stopped)
	for {
		select {
		case <-w.wake:
			w.commitQueued()
		case <-w.stop:
			// Nothing is queued after closed was set, which was
			// before stop was closed: this empties the queue for good.
			w.commitQueued()
			return
		}
	}
}

// commitQueued commits groups until the queue is empty.
func (w *writer) commitQueued() {
	for {
		w.mu.Lock()
		n := min(len(w.queue), maxGroup)
		if n == 0 {
			w.mu.Unlock()
			return
		}
		group := make([]*write, n)
		copy(group, w.queue)
		clear(w.queue[:n])
		w.queue = w.queue[n:]
		w.mu.Unlock()

		w.commit(group)
		w.commits++
		if w.checkpoint != nil && w.commits%checkpointEvery == 0 {
			select {
			case w.checkpoint <- struct{}{}:
			default: // one is running or already asked for
			}
		}
	}
}

// commit runs group in one transaction and answers each write. With
// several writes each has a savepoint: one that fails is rolled back to it
// and answered with its error, and the others commit. A write alone needs
// none: if it fails, the transaction is rolled back (two statements fewer
// on the path of a save when the writer is not busy).
func (w *writer) commit(group []*write) {
	results := make([]error, len(group))
	w.run(group, results)
	for i, req := range group {
		req.done <- results[i]
	}
}

// run runs group's transaction, leaving each write's result in results. A
// write that panics fails its whole group (the transaction is rolled
// back) instead of the store's commit loop, which serves every request.
func (w *writer) run(group []*write, results []error) {
	ctx := context.Background()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		for i := range results {
			results[i] = err
		}
		return
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			err := fmt.Errorf("sqlite: a write panicked, its group was rolled back: %v", p)
			for i := range results {
				results[i] = err
			}
		}
	}()
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
}

// checkpoints copies the WAL back into the database file when the writer
// asks, so that SQLite's own checkpoint, which runs inside the commit of
// whichever save crosses its threshold, does not have to. A PASSIVE
// checkpoint never blocks the writer or readers.
func (w *writer) checkpoints() {
	defer close(w.checked)
	for {
		select {
		case <-w.stop:
			return
		case <-w.checkpoint:
			w.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

// close refuses new writes, waits for the queued ones to commit, and
// stops the commit loop and the checkpoints.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.stopped
	<-w.checked
}
