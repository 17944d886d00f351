package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// A session key names the conversation a response belongs to, so that
// a fleet of engines (or a router in front of them) sends all its turns
// to the engine that holds its prefix in cache. It is derived from the
// first of these the request has:
//
//  1. the conversation it runs on;
//  2. the chain of previous_response_id: the key stored with the
//     previous response, which the chain's first response derived
//     (so every replica, and every turn of the chain, routes it the
//     same; a previous response stored without one gives its id);
//  3. the client's prompt_cache_key;
//  4. the client's session header (RunOptions.SessionID: Codex sends
//     session_id);
//  5. the instructions and the first input item (a client that resends
//     the whole history starts every request the same way).
//
// It is scoped by tenant: equal ids of two tenants give two keys, and a
// key says nothing of the tenant or the id (a hash of them, 128 bits in
// hex), so it can go upstream in a header.
func sessionKey(tenant string, req *responses.Request, conversationID, inherited, sessionID string) string {
	switch {
	case conversationID != "":
		return scopedKey(tenant, "conversation", conversationID)
	case req.PreviousResponseID != nil && inherited != "":
		return inherited
	case req.PreviousResponseID != nil:
		return scopedKey(tenant, "response", *req.PreviousResponseID)
	case req.PromptCacheKey != nil && *req.PromptCacheKey != "":
		return scopedKey(tenant, "prompt_cache_key", *req.PromptCacheKey)
	case sessionID != "":
		return scopedKey(tenant, "session", sessionID)
	}
	h := newKeyHash(tenant, "start")
	var instructions string
	if req.Instructions != nil {
		instructions = *req.Instructions
	}
	writeField(h, instructions)
	if len(req.Input.Items) > 0 {
		writeItem(h, &req.Input.Items[0])
	}
	return keyOf(h)
}

// scopedKey is the key of id, of a kind, for tenant.
func scopedKey(tenant, kind, id string) string {
	h := newKeyHash(tenant, kind)
	writeField(h, id)
	return keyOf(h)
}

func newKeyHash(tenant, kind string) hash.Hash {
	h := sha256.New()
	writeField(h, tenant)
	writeField(h, kind)
	return h
}

// writeField writes s with its length first, so that no two sequences of
// fields write the same bytes.
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// writeItem writes what an item says, not its id or status, which a
// client resending its history may or may not send.
func writeItem(h hash.Hash, it *responses.Item) {
	writeField(h, it.Type)
	writeField(h, it.Role)
	for i := range it.Content {
		writeField(h, it.Content[i].Type)
		writeField(h, it.Content[i].Text)
	}
	if c := it.Call; c != nil {
		writeField(h, c.CallID)
		writeField(h, c.Name)
		writeField(h, c.Arguments)
		writeField(h, string(c.Output))
	}
}

// keyOf is the key a hash gives: its first 128 bits, in hex.
func keyOf(h hash.Hash) string {
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// route is where the run's model turns go: its session key, its tenant
// (for the tenant's cache_salt) and the client's prompt_cache_key.
func (r *run) route() model.Route {
	rt := model.Route{Session: r.sessionKey, Tenant: r.tenant}
	if r.req.PromptCacheKey != nil {
		rt.PromptCacheKey = *r.req.PromptCacheKey
	}
	return rt
}

// servedBy notes the engine that served the run's last turn, for the
// response's log line: the turns of the run's own loop only, which run
// one at a time on its goroutine.
func (r *run) servedBy(engine string) { r.engine = engine }
