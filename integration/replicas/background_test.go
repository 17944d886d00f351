package replicas

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/model/mockllm"
)

// TestBackgroundReplicaKilled: a background response runs on replica a,
// its upstream request stalled; a is killed with -9. Replica b, started
// after the run began (so the job could only have gone to a), reads it
// failed with the server-stopped error within 1.5 leases, never stuck
// in_progress, never a 404.
func TestBackgroundReplicaKilled(t *testing.T) {
	args := []string{"--store-lease", killLease.String()}
	c := newCluster(t, nil, 1, args...)
	a := c.replicas[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cl := client(a.url())
	resp, err := cl.Responses.New(ctx, responses.ResponseNewParams{
		Model:      mockllm.DefaultModel,
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("#stall 1")},
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "queued" && resp.Status != "in_progress" {
		t.Fatalf("POST answered %s, want queued", resp.Status)
	}
	// The run is under way on a once the upstream has its request.
	if err := c.mock.WaitStarted(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b := newReplica(t, "b", append([]string{"--upstream-url", c.upstream, "--store", c.store.arg}, args...)...)
	b.start(t)

	a.kill()
	killedAt := time.Now()
	took, err := waitFailed(client(b.url()), resp.ID, killedAt, killedAt.Add(killLease*3/2+3*time.Second))
	if err != nil {
		t.Fatalf("background response of the killed replica: %v", err)
	}
	t.Logf("background response failed %v after the kill (lease %v)", took.Round(time.Millisecond), killLease)
}
