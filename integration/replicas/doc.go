// Package replicas tests loom as operators run it for replicas: several
// loom processes (the real binary, built by the test) on one shared store,
// behind HAProxy from Debian's packages that health-checks /readyz and
// retries on connection failure, over one scripted upstream
// (model/mockllm, in the test process). It holds the tests that need the
// processes: a response followed from replica to replica, and the load
// tests with a replica restarted by SIGTERM, or killed with -9, in the
// middle of the load.
//
// The tests need haproxy on PATH; they fail, saying how to install it,
// when it is missing (scripts/test installs it when run as root).
package replicas
