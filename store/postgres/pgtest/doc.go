// Package pgtest gives tests a fresh, empty PostgreSQL database each.
//
// URL(t) creates a database for the test and drops it when the test
// ends. The server is the one LOOM_TEST_POSTGRES_URL names (scripts/test
// starts one for the whole run); without it, pgtest starts a private
// cluster for the test binary: initdb and pg_ctl under a temporary
// directory, listening on 127.0.0.1 on a free port, run as the postgres
// user when the tests run as root (PostgreSQL refuses to run as root). A
// package whose tests call URL stops that cluster by calling Main from its
// TestMain. PostgreSQL missing is a test failure that says how to install
// it, never a skip: a store test that does not run must not pass.
package pgtest
