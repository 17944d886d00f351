package replicas

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/loomgate/loom/model/mockllm"
)

// cluster is a scripted upstream, a shared store and loom replicas on them.
type cluster struct {
	mock     *mockllm.Server
	upstream string
	store    *sharedStore
	replicas []*replica
}

// newCluster starts the scripted upstream (in this process, on loopback)
// and n replicas on one fresh shared store, one after the other (each
// brings the schema up to date when it opens the store). extra are
// additional loom serve flags.
func newCluster(t *testing.T, opts *mockllm.Options, n int, extra ...string) *cluster {
	t.Helper()
	return newClusterOn(t, newSharedStore(t), opts, n, extra...)
}

// newClusterOn is newCluster on a given store.
func newClusterOn(t *testing.T, store *sharedStore, opts *mockllm.Options, n int, extra ...string) *cluster {
	t.Helper()
	mock := mockllm.New(opts)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	t.Cleanup(mock.Close)
	c := &cluster{mock: mock, upstream: up.URL + "/v1", store: store}
	for i := range n {
		args := append([]string{
			"--upstream-url", c.upstream, "--store", c.store.arg,
			// The balancer checks every 100ms: it has stopped
			// routing here well within the drain, and responses
			// routed here just before run on into the shutdown.
			"--drain-delay", "300ms", "--shutdown-timeout", "20s",
		}, extra...)
		r := newReplica(t, string(rune('a'+i)), args...)
		r.start(t)
		c.replicas = append(c.replicas, r)
	}
	return c
}

// client is an openai-go client for baseURL (a replica or the balancer)
// that never retries, so every failure shows.
func client(baseURL string) openai.Client {
	return openai.NewClient(option.WithBaseURL(baseURL+"/v1/"), option.WithAPIKey("x"),
		option.WithMaxRetries(0), option.WithRequestTimeout(time.Minute))
}
