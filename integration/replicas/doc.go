// Package replicas tests loom as operators run it for replicas: several
// loom processes (the real binary, built by the test) on one PostgreSQL
// (a fresh database from store/postgres/pgtest), behind HAProxy from
// Debian's packages that health-checks /readyz and retries on connection
// failure, over one scripted upstream
// (model/mockllm, in the test process). It holds the tests that need the
// processes: a response followed from replica to replica, and the load
// tests with a replica restarted by SIGTERM, or killed with -9, in the
// middle of the load. The fault tests (faults_test.go) run a mixed load
// (JSON, streams, chains, background responses) and kill a replica, or
// crash PostgreSQL: a cluster of the test's own (startPGServer), never the one
// the other tests share.
//
// After each run the tests read the database directly: every response a
// client saw completed is stored, and nothing a crash may not leave is
// there (items without their response, responses stuck in_progress, a
// corrupt index by amcheck).
//
// The tests need haproxy on PATH and PostgreSQL; they fail, saying how to
// install them, when either is missing (scripts/test installs both when
// run as root).
package replicas
