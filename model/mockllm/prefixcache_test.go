package mockllm

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/harmony"
)

// chatUsage posts a raw chat body (JSON answer) and returns its prompt
// and cached tokens.
func chatUsage(t *testing.T, url, body string) (prompt, cached int) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var c chatCompletion
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &c) != nil {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return c.Usage.PromptTokens, c.Usage.PromptTokensDetails.CachedTokens
}

// TestPrefixCacheChat: a continuation finds its previous prompt's full
// blocks; a prompt that differs in its first piece, or in its cache_salt,
// finds nothing, however much of the rest it shares; the tools come after
// the leading system message, as a chat template lays them out.
func TestPrefixCacheChat(t *testing.T) {
	_, hs := start(t, &Options{PrefixCache: &PrefixCacheOptions{}})
	system := `{"role":"system","content":"` + strings.Repeat("Follow the house rules. ", 20) + `"}`
	user := `{"role":"user","content":"` + strings.Repeat("Please look into it. ", 20) + `"}`
	tools := `[{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]`
	body := func(system, tools string, msgs ...string) string {
		return `{"model":"m","tools":` + tools + `,"messages":[` + strings.Join(append([]string{system}, msgs...), ",") + `]}`
	}

	first, cached := chatUsage(t, hs.URL, body(system, tools, user))
	if cached != 0 {
		t.Errorf("a cold cache served %d tokens", cached)
	}
	pieces, _ := harmony.Encode(system)
	toolIDs, _ := harmony.Encode(tools[1 : len(tools)-1])
	userIDs, _ := harmony.Encode(user)
	if want := len(pieces) + len(toolIDs) + len(userIDs); first != want {
		t.Errorf("prompt_tokens %d, want %d: the o200k ids of the system message, the tool and the user message", first, want)
	}

	next, cached := chatUsage(t, hs.URL, body(system, tools, user, `{"role":"assistant","content":"On it."}`, `{"role":"user","content":"Go on."}`))
	if want := first - first%16; cached != want || next <= first {
		t.Errorf("continuation: %d of %d tokens cached, want %d (the previous prompt's full blocks)", cached, next, want)
	}

	// The same messages after another system message: nothing.
	other := strings.Replace(system, "house", "other", 1)
	if _, cached := chatUsage(t, hs.URL, body(other, tools, user)); cached != 0 {
		t.Errorf("a different first message: %d tokens cached, want 0", cached)
	}
	// The first prompt again with another cache_salt: nothing; with its
	// own salt again: found.
	salted := func(salt string) string {
		return strings.Replace(body(system, tools, user), `{"model":"m",`, `{"model":"m","cache_salt":"`+salt+`",`, 1)
	}
	if _, cached := chatUsage(t, hs.URL, salted("tenant-a")); cached != 0 {
		t.Errorf("another cache_salt: %d tokens cached, want 0", cached)
	}
	if _, cached := chatUsage(t, hs.URL, salted("tenant-a")); cached != (first-1)/16*16 {
		t.Errorf("the same cache_salt again: %d tokens cached, want %d", cached, (first-1)/16*16)
	}

	// Another tool: the full blocks of the ids the two prompts share,
	// which end inside the tool.
	otherTools := strings.Replace(tools, "search", "lookup", 1)
	otherIDs, _ := harmony.Encode(otherTools[1 : len(otherTools)-1])
	common := len(pieces)
	for common-len(pieces) < len(toolIDs) && toolIDs[common-len(pieces)] == otherIDs[common-len(pieces)] {
		common++
	}
	if _, cached := chatUsage(t, hs.URL, body(system, otherTools, user)); cached != common-common%16 || cached >= len(pieces)+len(toolIDs) {
		t.Errorf("another tool: %d tokens cached, want %d (the full blocks of the %d ids the prompts share)", cached, common-common%16, common)
	}
}

// TestPrefixCacheEvictsLRUTailFirst: a cache as large as one prompt,
// given another, evicts the least recently used blocks, the first
// prompt's last ones first, so that the first prompt still finds its
// start; usage on the completions endpoint reports it.
func TestPrefixCacheEvictsLRUTailFirst(t *testing.T) {
	a := userPrompt(t, strings.Repeat("alpha beta gamma ", 100))
	b := userPrompt(t, strings.Repeat("delta epsilon ", 40))
	blocksA, blocksB := len(a)/16, len(b)/16
	if blocksB == 0 || blocksB >= blocksA {
		t.Fatalf("prompts of %d and %d blocks, want 0 < b < a", blocksA, blocksB)
	}
	s, hs := start(t, &Options{PrefixCache: &PrefixCacheOptions{CapacityBlocks: blocksA}})
	cachedOf := func(prompt []uint32) int {
		t.Helper()
		got := readCompletion(t, postCompletions(testContext(t), t, hs, vllmBody(prompt)))
		u := got.chunks[len(got.chunks)-1].Usage
		if u == nil || u.PromptTokens != len(prompt) {
			t.Fatalf("usage %+v, want prompt_tokens %d", u, len(prompt))
		}
		if u.PromptTokensDetails == nil {
			return 0
		}
		return u.PromptTokensDetails.CachedTokens
	}
	if c := cachedOf(a); c != 0 {
		t.Errorf("cold: %d cached", c)
	}
	if c := cachedOf(b); c != 0 {
		t.Errorf("b after a: %d cached", c)
	}
	if c, want := cachedOf(a), (blocksA-blocksB)*16; c != want {
		t.Errorf("a again: %d tokens cached, want %d (its first %d blocks: its last %d were evicted for b's)", c, want, blocksA-blocksB, blocksB)
	}
	st := s.CacheStats()
	// a again evicted b's blocks and put its own back.
	if st.Blocks != blocksA || st.Evicted != 2*blocksB || st.Requests != 3 || st.PromptTokens != 2*len(a)+len(b) {
		t.Errorf("stats %+v, want %d blocks, %d evicted, 3 requests, %d prompt tokens", st, blocksA, 2*blocksB, 2*len(a)+len(b))
	}
}

// TestPrefixCacheWholePromptCached: a prompt found whole still computes
// its last token, so its last block is not counted as cached.
func TestPrefixCacheWholePromptCached(t *testing.T) {
	s := New(&Options{PrefixCache: &PrefixCacheOptions{PrefillPerToken: time.Millisecond}})
	ids := make([]uint32, 64)
	for i := range ids {
		ids[i] = uint32(i)
	}
	var c conversation
	s.lookupPrefix(&c, ids, nil)
	if c.cached != 0 || c.prefill != 64*time.Millisecond {
		t.Errorf("cold: cached %d, prefill %s, want 0 and 64ms", c.cached, c.prefill)
	}
	s.lookupPrefix(&c, ids, nil)
	if c.cached != 48 || c.prefill != 16*time.Millisecond {
		t.Errorf("again: cached %d, prefill %s, want 48 (all but the block of the last token) and 16ms", c.cached, c.prefill)
	}
	s.lookupPrefix(&c, append(ids, 1, 2, 3), nil)
	if c.cached != 64 || c.prefill != 3*time.Millisecond || c.promptTokens != 67 {
		t.Errorf("longer: cached %d of %d, prefill %s, want 64 of 67 and 3ms", c.cached, c.promptTokens, c.prefill)
	}
}

// TestSetCacheCapacity: cutting the cache's capacity evicts at once what
// no longer fits, tail first: a prompt held whole then finds only the
// start that fits.
func TestSetCacheCapacity(t *testing.T) {
	a := userPrompt(t, strings.Repeat("alpha beta gamma ", 100))
	blocksA := len(a) / 16
	s, hs := start(t, &Options{PrefixCache: &PrefixCacheOptions{}})
	cachedOf := func() int {
		t.Helper()
		got := readCompletion(t, postCompletions(testContext(t), t, hs, vllmBody(a)))
		u := got.chunks[len(got.chunks)-1].Usage
		if u == nil || u.PromptTokensDetails == nil {
			return 0
		}
		return u.PromptTokensDetails.CachedTokens
	}
	cachedOf()
	if st := s.CacheStats(); st.Blocks != blocksA {
		t.Fatalf("%d blocks held, want the prompt's %d", st.Blocks, blocksA)
	}
	half := blocksA / 2
	s.SetCacheCapacity(half)
	if st := s.CacheStats(); st.Blocks != half || st.Evicted != blocksA-half {
		t.Fatalf("after the cut: %d blocks held, %d evicted; want %d and %d", st.Blocks, st.Evicted, half, blocksA-half)
	}
	if c := cachedOf(); c != half*16 {
		t.Errorf("after the cut the prompt found %d tokens, want its first %d blocks' %d", c, half, half*16)
	}
}
