package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// The names of the measured servers and of the targets that reach them.
const (
	direct       = "direct" // the upstream, called straight
	proxy        = "proxy"
	loomSQLite   = "loom-sqlite"   // store true, SQLite file
	loomPostgres = "loom-postgres" // store true, PostgreSQL
	loomNoStore  = "loom-nostore"  // store false
)

// looms are the loom configurations, in the table's order.
var looms = []string{loomSQLite, loomPostgres, loomNoStore}

// fleet is the run's servers.
type fleet struct {
	upstream *server
	proxy    *server
	loom     map[string]*server // by name; no loomPostgres without PostgreSQL
}

// stores reports whether requests to loom name are stored.
func stores(name string) bool { return name != loomNoStore }

// progress writes one line of what the run is doing on standard error.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// run measures every row and writes the table to out.
func run(ctx context.Context, cfg *config, out io.Writer) (err error) {
	start := time.Now()
	deadline := start.Add(cfg.budget)
	dir := cfg.workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "loombench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if cfg.profileDir != "" {
		if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
			return err
		}
	}

	progress("building loom")
	loomBin, err := buildLoom(ctx, dir, "")
	if err != nil {
		return err
	}
	f, cleanup, err := startFleet(ctx, cfg, dir, loomBin)
	defer func() { err = errors.Join(err, cleanup()) }()
	if err != nil {
		return err
	}

	var rounds []measures
	var roundTime time.Duration
	for r := 1; r <= cfg.rounds; r++ {
		// A round that would end past the budget is not started: fewer
		// rounds rather than a long run. The first round always runs.
		if r > 1 && time.Now().Add(roundTime).After(deadline) {
			progress("round %d of %d dropped: it would end past the budget (%s)", r, cfg.rounds, cfg.budget)
			break
		}
		progress("round %d of %d", r, cfg.rounds)
		begin := time.Now()
		m, err := measureRound(ctx, cfg, f, r, deadline)
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		rounds = append(rounds, m)
		roundTime = time.Since(begin)
	}
	t := buildTable(cfg, rounds, f.loom[loomPostgres] != nil)
	return writeReport(out, cfg, t, len(rounds), time.Since(start))
}

// startFleet starts the upstream, the proxy and the loom processes, and
// returns what stops them (and drops the run's PostgreSQL database).
func startFleet(ctx context.Context, cfg *config, dir, loomBin string) (*fleet, func() error, error) {
	var started []*server
	var dropDB func() error
	cleanup := func() error {
		for _, s := range started {
			s.stop()
		}
		if dropDB != nil {
			return dropDB()
		}
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, cleanup, err
	}
	f := &fleet{loom: map[string]*server{}}
	f.upstream, err = startServer(ctx, "upstream", dir, self,
		func(addr string) []string { return []string{"upstream", "-addr", addr} }, "/v1/models")
	if err != nil {
		return nil, cleanup, err
	}
	started = append(started, f.upstream)
	f.proxy, err = startServer(ctx, proxy, dir, self,
		func(addr string) []string { return []string{"proxy", "-addr", addr, "-upstream", f.upstream.url} }, "/v1/models")
	if err != nil {
		return nil, cleanup, err
	}
	started = append(started, f.proxy)

	storeOf := map[string]string{
		loomSQLite: filepath.Join(dir, "loom-sqlite.db"),
		// Its requests say store false; its store is only opened.
		loomNoStore: filepath.Join(dir, "loom-nostore.db"),
	}
	if cfg.postgresURL != "" {
		url, drop, err := createDatabase(ctx, cfg.postgresURL)
		if err != nil {
			return nil, cleanup, err
		}
		dropDB = drop
		storeOf[loomPostgres] = url
	} else {
		progress("no PostgreSQL (-postgres, LOOM_TEST_POSTGRES_URL): its rows are not measured")
	}
	for _, name := range looms {
		store, ok := storeOf[name]
		if !ok {
			continue
		}
		s, err := startServer(ctx, name, dir, loomBin, func(addr string) []string {
			return []string{"serve", "--addr", addr, "--upstream-url", f.upstream.url + "/v1",
				"--store", store, "--model", mockllm.DefaultModel,
				// No drain: the run stops it.
				"--drain-delay", "0",
				// The idle-stream row holds more streams open than
				// one tenant may run by default.
				"--max-running", fmt.Sprint(cfg.idleStreams + 100),
				"--max-running-per-tenant", fmt.Sprint(cfg.idleStreams + 100)}
		}, "/readyz")
		if err != nil {
			return nil, cleanup, err
		}
		started = append(started, s)
		f.loom[name] = s
	}
	return f, cleanup, nil
}
