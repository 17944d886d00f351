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
	// turn is closed when this write's caller is to commit the next
	// group (see writer).
	turn chan struct{}
}

// writer makes the store's writes one at a time. SQLite allows one writer
// at a time; with writers on many pooled connections, all but one sleep
// in the busy handler, and under load their wake-ups are the p99. Here
// writes queue instead, and the queue is committed in groups (group
// commit): one transaction, one WAL append and one lock for all the writes
// waiting at that moment, each caller answered once the commit is done, so
// what it wrote is visible to every reader when it returns.
//
// There is no writer goroutine. A caller that finds nobody committing
// commits itself (a lone save pays no hand-off to another goroutine);
// callers that arrive meanwhile queue, and when the group ends the first
// of them is given the turn to commit the next group, its own write
// first. So each caller waits for at most the group in progress and its
// own, and nobody commits for others for ever.
type writer struct {
	db         *sql.DB
	mu         sync.Mutex
	queue      []*write
	committing bool // a caller is committing a group; false: queue is empty
	closed     bool
	idle       *sync.Cond // signalled when committing becomes false

	stop       chan struct{}
	stopped    chan struct{}
	checkpoint chan struct{} // nil: no checkpointing (in-memory)
	commits    int           // under mu
}

func newWriter(db *sql.DB, checkpoint bool) *writer {
	w := &writer{db: db, stop: make(chan struct{}), stopped: make(chan struct{})}
	w.idle = sync.NewCond(&w.mu)
	if checkpoint {
		w.checkpoint = make(chan struct{}, 1)
		go w.checkpoints()
	} else {
		close(w.stopped)
	}
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
	req := &write{ctx: ctx, fn: fn, done: make(chan error, 1), turn: make(chan struct{})}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	w.queue = append(w.queue, req)
	lead := !w.committing
	w.committing = true
	w.mu.Unlock()
	if lead {
		w.commitNext()
		return <-req.done
	}
	select {
	case err := <-req.done:
		return err
	case <-req.turn:
		w.commitNext()
		return <-req.done
	}
}

// commitNext commits the next group from the queue (the caller's write is
// its first), then gives the turn to the first write still queued, or
// marks the writer idle.
func (w *writer) commitNext() {
	w.mu.Lock()
	n := min(len(w.queue), maxGroup)
	group := make([]*write, n)
	copy(group, w.queue)
	w.queue = w.queue[n:]
	w.mu.Unlock()

	w.commit(group)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.commits++
	if w.checkpoint != nil && w.commits%checkpointEvery == 0 {
		select {
		case w.checkpoint <- struct{}{}:
		default: // one is running or already asked for
		}
	}
	if len(w.queue) > 0 {
		close(w.queue[0].turn)
		return
	}
	w.committing = false
	w.idle.Broadcast()
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
}

// checkpoints copies the WAL back into the database file when the writer
// asks, so that SQLite's own checkpoint, which runs inside the commit of
// whichever save crosses its threshold, does not have to. A PASSIVE
// checkpoint never blocks the writer or readers.
func (w *writer) checkpoints() {
	defer close(w.stopped)
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
// stops the checkpoints.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	for w.committing {
		w.idle.Wait()
	}
	w.mu.Unlock()
	close(w.stop)
	<-w.stopped
}
