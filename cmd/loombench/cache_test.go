package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	loomserver "github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// TestCacheSessionsThroughLoom runs the cache benchmark's sessions through
// loom (in this process) over one engine whose cache never evicts, in
// both styles: every turn completes with a tool call, and every turn
// after the first finds exactly the full blocks of the turn before, so
// each prompt begins with the previous one and the sessions share no
// block (their instructions differ from the start); the engine counts
// what the client read in usage.
func TestCacheSessionsThroughLoom(t *testing.T) {
	w := &workload{sessions: 3, turns: 4, instructionWords: 120, outputWords: 60, concurrent: 2}
	for _, style := range []cacheStyle{styleChain, styleResend} {
		t.Run(string(style), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			mock := mockllm.New(&mockllm.Options{Unrecorded: true, PrefixCache: &mockllm.PrefixCacheOptions{}})
			up := httptest.NewServer(mock)
			defer up.Close()
			defer mock.Close()
			db, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			backend := chat.New(up.URL+"/v1", "", nil)
			defer backend.CloseIdleConnections()
			e := engine.New(backend, db, &engine.Options{Models: []string{mockllm.DefaultModel}, Upstream: backend.Capabilities()})
			loom := httptest.NewServer(loomserver.New(e, nil))
			defer loom.Close()

			r := &sessionRunner{w: w, style: style, url: loom.URL, client: loom.Client()}
			res := r.run(ctx)
			if res.failed != 0 || res.abandoned != 0 || res.requests != w.sessions*w.turns {
				t.Fatalf("%d requests, %d failed, %d turns not run, want %d, 0, 0: %q", res.requests, res.failed, res.abandoned, w.sessions*w.turns, res.errors)
			}
			for s, turns := range res.turns {
				for k, u := range turns {
					want := 0
					if k > 0 {
						prev := turns[k-1].prompt
						want = prev - prev%16
					}
					if u.cached != want || u.prompt <= want {
						t.Errorf("session %d turn %d: %d of %d prompt tokens cached, want %d", s, k+1, u.cached, u.prompt, want)
					}
				}
				if res.lastPrompt[s] != turns[len(turns)-1].prompt {
					t.Errorf("session %d: last prompt %d, want %d", s, res.lastPrompt[s], turns[len(turns)-1].prompt)
				}
			}
			if st := mock.CacheStats(); st.Requests != res.requests || st.PromptTokens != res.prompt || st.CachedTokens != res.cached {
				t.Errorf("engine counted %+v, the client %d requests, %d prompt and %d cached tokens", st, res.requests, res.prompt, res.cached)
			}
			if len(res.ttfts) != res.requests || res.ttfts[0] <= 0 {
				t.Errorf("%d times to first token for %d requests", len(res.ttfts), res.requests)
			}
		})
	}
}
