package replicas

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	// The test reads the shared database directly, through
	// database/sql: pgx's driver for PostgreSQL, modernc's for SQLite.
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/loomgate/loom/store/postgres/pgtest"
)

// sharedStoreKind is the store the replicas share: "postgres" (a fresh
// database from pgtest.URL), or "sqlite" (one WAL file, which processes on
// one machine can share; the schema and these checks are the same but
// for the database's own integrity check).
const sharedStoreKind = "postgres"

// sharedStore is the database every replica of a test uses, and the
// test's own connection to it for checking what the replicas stored.
type sharedStore struct {
	kind string
	// arg is the value of the replicas' --store.
	arg string
	db  *sql.DB
}

// newSharedStore returns a fresh store for the replicas of one test.
func newSharedStore(t *testing.T) *sharedStore {
	t.Helper()
	switch sharedStoreKind {
	case "postgres":
		return postgresStore(t, pgtest.URL(t))
	default:
		s := &sharedStore{kind: "sqlite", arg: filepath.Join(t.TempDir(), "loom.db")}
		db, err := sql.Open("sqlite", "file:"+s.arg+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		s.db = db
		t.Cleanup(func() { s.db.Close() })
		return s
	}
}

// postgresStore is the shared store of the PostgreSQL database at url.
func postgresStore(t *testing.T, url string) *sharedStore {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &sharedStore{kind: "postgres", arg: url, db: db}
}

func storeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// statuses returns the status of every stored response by id.
func (s *sharedStore) statuses(t *testing.T) map[string]string {
	t.Helper()
	rows, err := s.db.QueryContext(storeCtx(t), `SELECT id, status FROM responses`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		out[id] = status
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// unsettled returns the responses stored queued or in_progress: what is
// still running, or what a fault stranded.
func (s *sharedStore) unsettled(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, status FROM responses WHERE status IN ('queued', 'in_progress')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return nil, err
		}
		out[id] = status
	}
	return out, rows.Err()
}

// waitSettled reads the store every interval until no response is queued
// or in progress, for at most bound (and so at most bound/interval+1
// times), and returns those left and how long it waited.
func (s *sharedStore) waitSettled(bound, interval time.Duration) (map[string]string, time.Duration, error) {
	start := time.Now()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		left, err := s.unsettled(ctx)
		cancel()
		if err != nil {
			return nil, time.Since(start), err
		}
		if len(left) == 0 || time.Since(start) >= bound || i >= int(bound/interval) {
			return left, time.Since(start), nil
		}
		time.Sleep(interval)
	}
}

// checkIntegrity fails the test for what no crash or restart may leave
// behind: items of a response that is not there, a response whose
// previous_response_id names nothing, a finished response whose stored
// events do not end with its final event, and a corrupt database file.
func (s *sharedStore) checkIntegrity(t *testing.T) {
	t.Helper()
	ctx := storeCtx(t)
	var orphans int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM response_items i
		WHERE NOT EXISTS (SELECT 1 FROM responses r WHERE r.id = i.response_id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d items without their response", orphans)
	}
	var broken int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM responses r
		WHERE r.previous_response_id <> ''
		AND NOT EXISTS (SELECT 1 FROM responses p WHERE p.id = r.previous_response_id)`).Scan(&broken); err != nil {
		t.Fatal(err)
	}
	if broken != 0 {
		t.Errorf("%d responses continue a response that is not stored", broken)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, status, events, response FROM responses`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, events, response string
		if err := rows.Scan(&id, &status, &events, &response); err != nil {
			t.Fatal(err)
		}
		// A response failed by the sweep of a dead replica's lease
		// ends with the events it had stored: none for a stream (it
		// stores them at the end), those appended so far for a
		// background run. Following it ends on its status (see
		// engine.Follow).
		swept := status == "failed" && (events == "" || sweptFailed(response))
		if want := finalEventType(status); want != "" && !swept {
			if got := lastEventType(events); got != want {
				t.Errorf("response %s is %s but its last stored event is %q, want %q", id, status, got, want)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var inProgress int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM responses WHERE status = 'in_progress'`).Scan(&inProgress); err != nil {
		t.Fatal(err)
	}
	if inProgress != 0 {
		t.Errorf("%d responses still in_progress after every replica finished or was swept", inProgress)
	}
	s.checkDatabase(t)
}

// checkDatabase runs the database's own consistency check: amcheck's
// B-tree checks of every index (with heapallindexed, so each table row
// is found in each of its indexes) on PostgreSQL, integrity_check on
// SQLite.
func (s *sharedStore) checkDatabase(t *testing.T) {
	t.Helper()
	ctx := storeCtx(t)
	if s.kind == "sqlite" {
		var check string
		if err := s.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
			t.Errorf("integrity_check: %q %v", check, err)
		}
		return
	}
	if _, err := s.db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS amcheck`); err != nil {
		t.Fatalf("amcheck (in Debian's postgresql package): %v", err)
	}
	var checked int
	err := s.db.QueryRowContext(ctx, `SELECT count(bt_index_check(c.oid, true))
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_am am ON am.oid = c.relam
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE am.amname = 'btree' AND n.nspname = current_schema()`).Scan(&checked)
	if err != nil {
		t.Errorf("amcheck: %v", err)
	}
	if checked == 0 {
		t.Errorf("amcheck checked no index")
	}
}

// sweptFailed reports whether a failed response's error is the one the
// sweep of a dead replica's lease gives: code server_error and the
// sweep's message (engine's errServerStopped).
func sweptFailed(response string) bool {
	var r struct {
		Error *struct{ Code, Message string }
	}
	json.Unmarshal([]byte(response), &r)
	return r.Error != nil && r.Error.Code == "server_error" &&
		strings.Contains(r.Error.Message, "stopped before it finished")
}

// finalEventType is the event a response with status ends its stream with
// ("" for a status that is not final).
func finalEventType(status string) string {
	switch status {
	case "completed", "failed", "incomplete":
		return "response." + status
	}
	return ""
}

// lastEventType is the type of the last event of a SQLite events column
// (events one per line).
func lastEventType(events string) string {
	for len(events) > 0 && events[len(events)-1] == '\n' {
		events = events[:len(events)-1]
	}
	if i := strings.LastIndexByte(events, '\n'); i >= 0 {
		events = events[i+1:]
	}
	var ev struct{ Type string }
	json.Unmarshal([]byte(events), &ev)
	return ev.Type
}
