package replicas

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/internal/testutil"
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

// TestBackgroundAcrossReplicas drives two loom processes on one store with
// openai-go over a slow scripted upstream: a background response created on
// a is polled to completion on b; a background stream read for 20 events on
// a and dropped resumes on b with starting_after=19 at sequence 20 and runs
// to response.completed; a background response stalled upstream is
// cancelled from b, reads cancelled, and the upstream saw its request
// cancelled.
func TestBackgroundAcrossReplicas(t *testing.T) {
	c := newCluster(t, nil, 2)
	a, b := client(c.replicas[0].url()), client(c.replicas[1].url())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	input := func(s string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
	}
	poll := func(id string) *responses.Response {
		t.Helper()
		var r *responses.Response
		testutil.WaitFor(t, "response "+id+" to finish", func() bool {
			var err error
			if r, err = b.Responses.Get(ctx, id, responses.ResponseGetParams{}); err != nil {
				t.Fatal(err)
			}
			return r.Status != "queued" && r.Status != "in_progress"
		})
		return r
	}

	// Created on a, completed when polled on b.
	created, err := a.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: input("#latency 20ms\n#say done in the background"), Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if created.Status != "queued" {
		t.Fatalf("POST answered %s, want queued", created.Status)
	}
	if r := poll(created.ID); r.Status != "completed" || r.OutputText() != "done in the background" {
		t.Fatalf("on b: %s %q", r.Status, r.OutputText())
	}

	// A background stream dropped on a after 20 events resumes on b.
	stream := a.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: input("#latency 20ms\n#tokens 60"), Background: openai.Bool(true),
	})
	var id string
	var seen []int64
	for len(seen) < 20 && stream.Next() {
		ev := stream.Current()
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		seen = append(seen, ev.SequenceNumber)
	}
	stream.Close()
	if len(seen) != 20 || id == "" {
		t.Fatalf("first read: %d events, id %q, err %v", len(seen), id, stream.Err())
	}
	resumed := b.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(19)})
	next, last := int64(20), ""
	for resumed.Next() {
		ev := resumed.Current()
		if ev.SequenceNumber != next {
			t.Fatalf("resumed event has sequence %d, want %d", ev.SequenceNumber, next)
		}
		next++
		last = ev.Type
	}
	if err := resumed.Err(); err != nil {
		t.Fatal(err)
	}
	if last != "response.completed" || next <= 21 {
		t.Fatalf("resumed stream ended with %q after %d events", last, next-20)
	}

	// Cancelled from b while stalled upstream, wherever it runs.
	stalled, err := a.Responses.New(ctx, responses.ResponseNewParams{
		Model: mockllm.DefaultModel, Input: input("#stall"), Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.mock.WaitStarted(ctx, 3); err != nil {
		t.Fatal(err)
	}
	got, err := b.Responses.Cancel(ctx, stalled.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "cancelled" {
		t.Errorf("cancel answered %s, want cancelled", got.Status)
	}
	if err := c.mock.WaitCancelled(ctx, 1); err != nil {
		t.Errorf("the upstream request was not cancelled: %v", err)
	}
	if r := poll(stalled.ID); r.Status != "cancelled" {
		t.Errorf("after cancel, on b: %s", r.Status)
	}
}
