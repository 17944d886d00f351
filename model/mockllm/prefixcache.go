package mockllm

import (
	"container/list"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"sync"
	"time"

	"github.com/loomgate/loom/harmony"
)

// PrefixCacheOptions make the mock simulate an engine's prefix cache (vLLM's
// automatic prefix caching), so that a benchmark can measure how much of
// the prompts a fleet of engines serves from cache and what its misses
// cost in time to first token.
//
// The prompt is cut into blocks of BlockTokens token ids; a block is known
// by the hash of its ids and of every block before it (its prefix chain),
// so a block is reused only when the whole prompt up to it is the same. A
// request's cached tokens are its leading blocks found in the cache, at
// most all but its last token (an engine computes at least one); then
// every full block of the prompt is put in the cache, the most recently
// used first. Blocks are evicted least recently used first; within one
// prompt the later blocks are evicted before the earlier ones (vLLM frees
// a request's blocks tail first), so that a conversation loses the end of
// its prefix before its start. The output is not cached: a client's next
// prompt holds it as rendered again, which need not be the tokens the
// model wrote.
//
// The token ids are the prompt's ids on the completions endpoint. On the
// chat endpoint they are the o200k ids (harmony.Encode) of the body's
// pieces in the order a chat template lays them out: the leading system
// and developer messages, the tools, then the other messages; each
// message and each tool is its raw JSON, encoded on its own (a chat
// template delimits messages with special tokens, so tokens never span
// two), so two requests share a prefix exactly when their bodies share
// those pieces byte for byte. prompt_tokens is then the number of those
// ids. A request's "cache_salt" (vLLM's) is mixed into its first block, so
// that requests of different salts share nothing.
type PrefixCacheOptions struct {
	// BlockTokens is the block size in tokens (default 16, vLLM's).
	BlockTokens int
	// CapacityBlocks is how many blocks the cache holds; 0 is no limit.
	CapacityBlocks int
	// PrefillPerToken is the time the engine takes per token it does not
	// find in the cache, waited before the first byte of the answer (on
	// top of FirstByteLatency or #delay). Requests prefill side by side:
	// the simulation has no queue.
	PrefillPerToken time.Duration
}

// CacheStats are the counters of the simulated prefix cache.
type CacheStats struct {
	Requests     int // requests looked up
	PromptTokens int // their prompt tokens
	CachedTokens int // of those, served from cache
	Blocks       int // blocks held now
	Evicted      int // blocks evicted so far
}

// prefixCache is the simulated cache. The list holds block hashes, most
// recently used at the front; blocks maps each hash to its element.
type prefixCache struct {
	blockTokens int
	capacity    int
	prefill     time.Duration

	mu     sync.Mutex
	lru    *list.List
	blocks map[uint64]*list.Element
	stats  CacheStats
}

func newPrefixCache(o *PrefixCacheOptions) *prefixCache {
	c := &prefixCache{blockTokens: o.BlockTokens, capacity: o.CapacityBlocks, prefill: o.PrefillPerToken,
		lru: list.New(), blocks: make(map[uint64]*list.Element)}
	if c.blockTokens <= 0 {
		c.blockTokens = 16
	}
	return c
}

// blockHashes hashes each full block of ids with the hash of the block
// before it; the first block's parent is the hash of salt, as vLLM mixes a
// request's cache_salt into its first block.
func (c *prefixCache) blockHashes(ids []uint32, salt string) []uint64 {
	hashes := make([]uint64, 0, len(ids)/c.blockTokens)
	var parent uint64
	if salt != "" {
		h := fnv.New64a()
		h.Write([]byte(salt))
		parent = h.Sum64()
	}
	buf := make([]byte, 8+4*c.blockTokens)
	for start := 0; start+c.blockTokens <= len(ids); start += c.blockTokens {
		binary.LittleEndian.PutUint64(buf, parent)
		for i, id := range ids[start : start+c.blockTokens] {
			binary.LittleEndian.PutUint32(buf[8+4*i:], id)
		}
		h := fnv.New64a()
		h.Write(buf)
		parent = h.Sum64()
		hashes = append(hashes, parent)
	}
	return hashes
}

// serve looks a prompt up and caches its blocks; it returns how many of
// its tokens were cached.
func (c *prefixCache) serve(ids []uint32, salt string) int {
	hashes := c.blockHashes(ids, salt)
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for hit < len(hashes) {
		if _, ok := c.blocks[hashes[hit]]; !ok {
			break
		}
		hit++
	}
	// At least the last token is computed.
	hit = min(hit, (len(ids)-1)/c.blockTokens)
	// Tail first, so that the head ends up most recently used.
	for i := len(hashes) - 1; i >= 0; i-- {
		if e, ok := c.blocks[hashes[i]]; ok {
			c.lru.MoveToFront(e)
		} else {
			c.blocks[hashes[i]] = c.lru.PushFront(hashes[i])
		}
	}
	c.evictToCapacity()
	cached := hit * c.blockTokens
	c.stats.Requests++
	c.stats.PromptTokens += len(ids)
	c.stats.CachedTokens += cached
	return cached
}

// evictToCapacity evicts the least recently used blocks until the cache
// holds no more than its capacity. c.mu is held.
func (c *prefixCache) evictToCapacity() {
	for c.capacity > 0 && c.lru.Len() > c.capacity {
		e := c.lru.Back()
		delete(c.blocks, e.Value.(uint64))
		c.lru.Remove(e)
		c.stats.Evicted++
	}
}

// setCapacity changes the capacity, evicting at once what no longer fits.
func (c *prefixCache) setCapacity(blocks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capacity = blocks
	c.evictToCapacity()
}

func (c *prefixCache) snapshot() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Blocks = c.lru.Len()
	return st
}

// CacheStats returns the prefix cache's counters; zero without
// Options.PrefixCache.
func (s *Server) CacheStats() CacheStats {
	if s.cache == nil {
		return CacheStats{}
	}
	return s.cache.snapshot()
}

// SetCacheCapacity changes the prefix cache's capacity (blocks; 0 is no
// limit), evicting least recently used blocks at once when it shrinks: a
// benchmark's single engine standing for a fleet that loses one of its
// engines. It does nothing without Options.PrefixCache.
func (s *Server) SetCacheCapacity(blocks int) {
	if s.cache != nil {
		s.cache.setCapacity(blocks)
	}
}

// chatPromptIDs are the token ids the cache sees for a chat body (see
// PrefixCacheOptions).
func chatPromptIDs(body []byte) ([]uint32, error) {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var ids []uint32
	var err error
	lead := 0
	for lead < len(req.Messages) && isInstructions(req.Messages[lead]) {
		lead++
	}
	for _, piece := range [][]json.RawMessage{req.Messages[:lead], req.Tools, req.Messages[lead:]} {
		for _, raw := range piece {
			if ids, err = harmony.AppendEncode(ids, string(raw)); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}

// isInstructions reports whether a raw chat message is a system or
// developer message.
func isInstructions(raw json.RawMessage) bool {
	var m struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.Role == "system" || m.Role == "developer"
}

// lookupPrefix serves a prompt of ids from the cache and puts what it
// found in c: the prompt's token count, its cached tokens and the time
// the others take to prefill. body is the request's, for its cache_salt.
func (s *Server) lookupPrefix(c *conversation, ids []uint32, body []byte) {
	var salted struct {
		CacheSalt string `json:"cache_salt"`
	}
	_ = json.Unmarshal(body, &salted)
	c.promptTokens = len(ids)
	c.cached = s.cache.serve(ids, salted.CacheSalt)
	c.prefill = time.Duration(c.promptTokens-c.cached) * s.cache.prefill
}
