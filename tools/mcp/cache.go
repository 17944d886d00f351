package mcp

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/loomgate/loom/tools"
)

// CacheOptions configures a Cache. Nil means defaults.
type CacheOptions struct {
	// MaxEntries bounds the number of cached lists (default 1024). When
	// full, expired entries go first, then those closest to expiring.
	MaxEntries int
	// MaxTTL caps a server's ttlMs (default 1h): a server cannot pin a
	// stale list in loom forever.
	MaxTTL time.Duration
	// LegacyTTL is how long the list of a session-based (pre-2026-07-28)
	// server is kept. Those servers know nothing of ttlMs and cacheScope;
	// listing one costs a session (initialize, tools/list, DELETE), so
	// loom keeps the list for this long, private to the auth context.
	// 0 means 5 minutes; a negative value disables caching them.
	LegacyTTL time.Duration
	// Now is the clock, for tests; nil means time.Now.
	Now func() time.Time
}

// Cache holds MCP tool lists across requests (SEP-2549): keyed by server
// URL and auth context, kept for the server's ttlMs, and shared between
// auth contexts only when the server marked the list cacheScope "public".
// A "private" list is found only by requests with the same credentials.
// Results with ttlMs 0 (the protocol's "immediately stale", and the go-sdk
// server's default) are not cached.
//
// Keys hold the server URL and an HMAC of the credentials under a random
// per-Cache key, never a secret. A hit takes a read lock and a map lookup.
// A Cache is safe for concurrent use and is meant to be shared by every
// Server of a Client.
type Cache struct {
	mu       sync.RWMutex
	entries  map[cacheKey]*cacheEntry
	inflight map[cacheKey]*flight

	max       int
	maxTTL    time.Duration
	legacyTTL time.Duration
	now       func() time.Time
	hmacKey   [32]byte
}

type cacheKey struct {
	url     string
	auth    authContext // zero for public lists
	private bool        // so the anonymous context's private lists stay its own
}

type cacheEntry struct {
	list    *toolList
	expires time.Time
}

// toolList is one server's full tool list, immutable once built.
type toolList struct {
	defs []tools.Definition
	// byName indexes defs and tells, per tool, whether its input schema
	// carries x-mcp-header annotations (the SDK needs the tool's
	// definition in its session to send the Mcp-Param-* headers).
	byName map[string]toolInfo
	legacy bool
}

type toolInfo struct {
	index         int
	paramsHeaders bool
}

var errListingFailed = errors.New("mcp: listing tools failed")

type flight struct {
	done chan struct{}
	list *toolList
	err  error
}

// NewCache returns an empty cache.
func NewCache(opts *CacheOptions) *Cache {
	var o CacheOptions
	if opts != nil {
		o = *opts
	}
	c := &Cache{
		entries:   make(map[cacheKey]*cacheEntry),
		inflight:  make(map[cacheKey]*flight),
		max:       o.MaxEntries,
		maxTTL:    o.MaxTTL,
		legacyTTL: o.LegacyTTL,
		now:       o.Now,
	}
	if c.max <= 0 {
		c.max = 1024
	}
	if c.maxTTL <= 0 {
		c.maxTTL = time.Hour
	}
	if c.legacyTTL == 0 {
		c.legacyTTL = 5 * time.Minute
	}
	if c.now == nil {
		c.now = time.Now
	}
	_, _ = rand.Read(c.hmacKey[:])
	return c
}

// Len returns the number of entries, expired ones included.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// Purge drops every entry.
func (c *Cache) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
}

// get returns the fresh list for url as seen by auth: the auth context's
// private list first, then a public one.
func (c *Cache) get(url string, auth authContext) (*toolList, bool) {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e, ok := c.entries[cacheKey{url, auth, true}]; ok && now.Before(e.expires) {
		return e.list, true
	}
	if e, ok := c.entries[cacheKey{url: url}]; ok && now.Before(e.expires) {
		return e.list, true
	}
	return nil, false
}

// put stores a list with the server's cache hints.
func (c *Cache) put(url string, auth authContext, list *toolList, ttl time.Duration, scope string) {
	if list.legacy {
		ttl, scope = c.legacyTTL, "private"
	}
	if ttl <= 0 {
		return
	}
	ttl = min(ttl, c.maxTTL)
	key := cacheKey{url: url}
	if scope == "private" {
		key.auth, key.private = auth, true
	} // else "public", or absent: the protocol's default is public
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		c.evictLocked(now)
	}
	c.entries[key] = &cacheEntry{list: list, expires: now.Add(ttl)}
}

// evictLocked makes room for one entry: it drops every expired entry, or
// failing that the one that expires first.
func (c *Cache) evictLocked(now time.Time) {
	var victim cacheKey
	var first time.Time
	dropped := false
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			dropped = true
			continue
		}
		if first.IsZero() || e.expires.Before(first) {
			victim, first = k, e.expires
		}
	}
	if !dropped && !first.IsZero() {
		delete(c.entries, victim)
	}
}

// do runs list once for concurrent misses on the same server and auth
// context, so a burst of requests lists a server once. A waiter gives up
// when its own ctx is done; the listing goes on for the others.
func (c *Cache) do(ctx context.Context, url string, auth authContext, list func() (*toolList, error)) (*toolList, error) {
	key := cacheKey{url, auth, true}
	c.mu.Lock()
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.list, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()

	defer func() {
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		close(f.done)
	}()
	// Until list returns, the flight's outcome is a failure, so that waiters
	// of a listing that panics are not told it succeeded.
	f.err = errListingFailed
	f.list, f.err = list()
	return f.list, f.err
}
