package replicas

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model/mockllm"
)

// TestBackgroundClaimedByKilledReplica: replica a's River client claims a
// background job, and a is killed with -9 before the run starts (held
// there by LOOM_TEST_HOLD_CLAIMED, which writes the claimed id to a file:
// the signal the test waits on). Replica b, started after the claim (so
// the job could only have gone to a), reads the response queued, then
// failed with server_error within 1.5 leases of the claim, never a 404,
// never queued for good; nothing reached the upstream. A background
// response created afterwards runs on b.
func TestBackgroundClaimedByKilledReplica(t *testing.T) {
	lease := []string{"--store-lease", killLease.String()}
	c := newCluster(t, nil, 0)
	held := filepath.Join(t.TempDir(), "claimed")
	a := newReplica(t, "a", append([]string{"--upstream-url", c.upstream, "--store", c.store.arg}, lease...)...)
	a.env = []string{"LOOM_TEST_HOLD_CLAIMED=" + held}
	a.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ca := client(a.url())
	resp, err := ca.Responses.New(ctx, responses.ResponseNewParams{
		Model:      mockllm.DefaultModel,
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("#say never")},
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "queued" {
		t.Fatalf("POST answered %s, want queued", resp.Status)
	}
	// The file names the id once a's River client has claimed the job.
	testutil.WaitFor(t, "replica a to claim the job", func() bool {
		b, err := os.ReadFile(held)
		return err == nil && strings.Contains(string(b), resp.ID+"\n")
	})
	claimedBy := time.Now() // the claim was before this
	b := newReplica(t, "b", append([]string{"--upstream-url", c.upstream, "--store", c.store.arg}, lease...)...)
	b.start(t)
	a.kill()

	bound := killLease*3/2 + 3*time.Second
	cl := client(b.url())
	for i := 0; ; i++ {
		r, err := cl.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == "failed" {
			if r.Error.Code != "server_error" {
				t.Fatalf("failed with %+v, want code server_error", r.Error)
			}
			t.Logf("the claimed response failed %v after the claim was seen (lease %v)", time.Since(claimedBy).Round(time.Millisecond), killLease)
			break
		}
		if r.Status != "queued" {
			t.Fatalf("status %q, want queued then failed", r.Status)
		}
		// The sweep runs every half lease: read ten times as often.
		if time.Since(claimedBy) > bound || i >= 1000 {
			t.Fatalf("still queued %v after the claim (lease %v)", time.Since(claimedBy).Round(time.Millisecond), killLease)
		}
		time.Sleep(killLease / 20)
	}
	if n := c.mock.Stats().Started; n != 0 {
		t.Errorf("the upstream got %d requests, want none (the run never started)", n)
	}

	next, err := cl.Responses.New(ctx, responses.ResponseNewParams{
		Model:      mockllm.DefaultModel,
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("#say ran on b")},
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the next background response to finish", func() bool {
		r, err := cl.Responses.Get(ctx, next.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == "queued" || r.Status == "in_progress" {
			return false
		}
		if r.Status != "completed" || r.OutputText() != "ran on b" {
			t.Fatalf("the next background response: %s %q", r.Status, r.OutputText())
		}
		return true
	})
	c.store.checkIntegrity(t)
}
