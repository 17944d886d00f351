package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestGroupCommitIsolatesFailures commits a group of three writes whose
// second fails after writing: the first and third commit, nothing of the
// second remains, and each caller gets its own result. A failing write
// alone leaves nothing either.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	d := openTest(t, "")
	ctx := context.Background()
	boom := errors.New("boom")
	insert := func(id string, fail bool) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO responses (id, created_at, status, response) VALUES (?, 1, 'completed', '{}')`, id); err != nil {
				return err
			}
			if fail {
				return boom
			}
			return nil
		}
	}
	mk := func(fn func(context.Context, *sql.Tx) error) *write {
		return &write{ctx: ctx, fn: fn, done: make(chan error, 1)}
	}
	group := []*write{mk(insert("resp_a", false)), mk(insert("resp_b", true)), mk(insert("resp_c", false))}
	d.w.commit(group)
	for i, want := range []error{nil, boom, nil} {
		if err := <-group[i].done; !errors.Is(err, want) {
			t.Errorf("write %d: %v, want %v", i, err, want)
		}
	}
	alone := mk(insert("resp_d", true))
	d.w.commit([]*write{alone})
	if err := <-alone.done; !errors.Is(err, boom) {
		t.Errorf("write alone: %v, want boom", err)
	}
	for id, want := range map[string]bool{"resp_a": true, "resp_b": false, "resp_c": true, "resp_d": false} {
		_, err := d.GetResponse(ctx, id)
		if got := err == nil; got != want {
			t.Errorf("%s stored: %v, want %v (%v)", id, got, want, err)
		}
	}
	// The writer is still usable after failures.
	if err := d.SaveResponse(ctx, sampleRecord("resp_after")); err != nil {
		t.Errorf("save after failed writes: %v", err)
	}
}

// TestCloseWaitsForQueuedWrites closes the store while saves are queued:
// each save either reports success, and is there after reopening, or
// fails; none is lost after reporting success.
func TestCloseWaitsForQueuedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	d, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 16
	results := make(chan string, writers*10)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range 10 {
				id := fmt.Sprintf("resp_%d_%d", w, i)
				err := d.SaveResponse(context.Background(), sampleRecord(id))
				// After Close a save fails (refused by the writer,
				// or earlier by database/sql); that is fine.
				if err == nil {
					results <- id
				}
			}
		})
	}
	close(start)
	// Close while the writers are busy (Close waits for what is queued).
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	d = openTest(t, path)
	for id := range results {
		if _, err := d.GetResponse(context.Background(), id); err != nil {
			t.Errorf("%s was reported saved but is not there: %v", id, err)
		}
	}
}

// TestWALStaysBounded saves many responses to a file database: the
// checkpoints keep the WAL file from growing with them (it once grew by
// every save, 130 MB after 3000, when every checkpoint came back busy).
func TestWALStaysBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	d := openTest(t, path)
	const saves = 2000
	for i := range saves {
		if err := d.SaveResponse(context.Background(), sampleRecord(fmt.Sprint("resp_", i))); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// Without working checkpoints every save appends to the WAL: about
	// 80 MB for 2000 saves. With them it is reused from its start: SQLite's
	// own threshold is 1000 pages (4 MB), and on a loaded machine the
	// checkpoint goroutine may lag well behind (15 MB was seen), so the
	// bound is what no lag but only missing checkpoints reach.
	if st.Size() > 40<<20 {
		t.Errorf("WAL is %d MB after %d saves: checkpoints are not resetting it", st.Size()>>20, saves)
	}
}

// busyWriter holds d's commit loop in a write until the returned release
// is called, so that the writes queued meanwhile wait for the next group.
func busyWriter(t *testing.T, d *DB) (release func()) {
	t.Helper()
	started, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- d.w.do(context.Background(), func(context.Context, *sql.Tx) error {
			close(started)
			<-hold
			return nil
		})
	}()
	<-started
	return func() {
		close(hold)
		if err := <-done; err != nil {
			t.Errorf("the holding write: %v", err)
		}
	}
}

// waitQueued waits until n writes are queued for the next group. It polls
// the queue (bounded), yielding between looks: the writes are queued by
// goroutines that have no signal of their own to give.
func waitQueued(t *testing.T, d *DB, n int) {
	t.Helper()
	for range 1_000_000 {
		d.w.mu.Lock()
		queued := len(d.w.queue)
		d.w.mu.Unlock()
		if queued >= n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d writes were never queued", n)
}

// TestWriterKeepsOrderAndSkipsCancelled queues three writes behind a busy
// writer: the first and third set the same row, the second's context is
// cancelled while it waits. They commit in one group, in the order they
// were queued (the third's value stays); the cancelled one is answered
// with its context's error and never runs.
func TestWriterKeepsOrderAndSkipsCancelled(t *testing.T) {
	d := openTest(t, "")
	set := func(status string) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO responses (id, created_at, status, response) VALUES ('resp_o', 1, ?, '{}')
				ON CONFLICT (id) DO UPDATE SET status = excluded.status`, status)
			return err
		}
	}
	release := busyWriter(t, d)
	results := make([]chan error, 3)
	for i := range results {
		results[i] = make(chan error, 1)
	}
	go func() { results[0] <- d.w.do(context.Background(), set("first")) }()
	waitQueued(t, d, 1)
	cancelled, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{}, 1)
	go func() {
		results[1] <- d.w.do(cancelled, func(context.Context, *sql.Tx) error { ran <- struct{}{}; return nil })
	}()
	waitQueued(t, d, 2)
	go func() { results[2] <- d.w.do(context.Background(), set("third")) }()
	waitQueued(t, d, 3)
	cancel()
	release()
	for i, want := range []error{nil, context.Canceled, nil} {
		if err := <-results[i]; !errors.Is(err, want) {
			t.Errorf("write %d: %v, want %v", i, err, want)
		}
	}
	select {
	case <-ran:
		t.Error("the write cancelled while queued ran")
	default:
	}
	var status string
	if err := d.db.QueryRow(`SELECT status FROM responses WHERE id = 'resp_o'`).Scan(&status); err != nil || status != "third" {
		t.Errorf("status %q (%v), want the last queued write's, third", status, err)
	}
}

// TestWriterSurvivesAPanickingWrite: a write that panics fails with an
// error (its group rolled back) instead of taking down the store's commit
// loop; the writes after it still commit.
func TestWriterSurvivesAPanickingWrite(t *testing.T) {
	d := openTest(t, "")
	ctx := context.Background()
	err := d.w.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO responses (id, created_at, status, response) VALUES ('resp_p', 1, 'completed', '{}')`); err != nil {
			return err
		}
		panic("boom")
	})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panicking write: %v, want an error naming the panic", err)
	}
	if _, err := d.GetResponse(ctx, "resp_p"); err == nil {
		t.Error("the panicking write's row was committed")
	}
	if err := d.SaveResponse(ctx, sampleRecord("resp_after")); err != nil {
		t.Errorf("save after a panicking write: %v", err)
	}
}

// TestWriteAfterCloseIsRefused: once the store is closed a write is
// refused at once, not queued for a loop that has ended.
func TestWriteAfterCloseIsRefused(t *testing.T) {
	d, err := Open(context.Background(), Memory, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.w.do(context.Background(), func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, errClosed) {
		t.Errorf("write after Close: %v, want errClosed", err)
	}
}
