package replicas

import (
	"testing"

	"github.com/loomgate/loom/store/postgres/pgtest"
)

// startPGServer starts a PostgreSQL cluster of the test's own, which the
// test may crash and start again on the same port: a fault the cluster
// every other test shares (LOOM_TEST_POSTGRES_URL, or pgtest's) must never
// see. It is durable (pgtest.ClusterOptions): a client told "stored" is
// right to find its answer after the crash. It is removed when the test
// ends.
func startPGServer(t *testing.T) *pgtest.Cluster {
	t.Helper()
	c, err := pgtest.StartCluster(&pgtest.ClusterOptions{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Remove() })
	return c
}
