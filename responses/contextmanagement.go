package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ContextManagement is one entry of a request's context_management: the
// compaction strategy, which compacts the conversation before the model's
// first turn once its rendered input passes CompactThreshold tokens.
type ContextManagement struct {
	Type             string `json:"type"`
	CompactThreshold *int   `json:"compact_threshold,omitempty"`
}

// ContextCompaction is the only context_management type.
const ContextCompaction = "compaction"

// contextManagement decodes context_management: null or absent (none),
// or a list of entries, each of type compaction with a positive
// compact_threshold when it has one. The error names the entry at fault.
func (r *Request) contextManagement() ([]ContextManagement, *APIError) {
	raw := bytes.TrimSpace(r.ContextManagement)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var entries []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &entries) != nil {
		return nil, BadRequest("context_management", "context_management must be an array of {type, compact_threshold} objects, got %s", jsonKind(raw))
	}
	list := make([]ContextManagement, 0, len(entries))
	for i, e := range entries {
		param := fmt.Sprintf("context_management[%d]", i)
		var fields map[string]json.RawMessage
		if json.Unmarshal(e, &fields) != nil || fields == nil {
			return nil, BadRequest(param, "a context_management entry must be an object, got %s", jsonKind(e))
		}
		var cm ContextManagement
		if t, ok := fields["type"]; !ok || json.Unmarshal(t, &cm.Type) != nil || cm.Type != ContextCompaction {
			return nil, BadRequest(param+".type", "context_management type must be %q", ContextCompaction)
		}
		if v, ok := fields["compact_threshold"]; ok && string(bytes.TrimSpace(v)) != "null" {
			var n int
			if json.Unmarshal(v, &n) != nil || n < 1 {
				return nil, BadRequest(param+".compact_threshold", "compact_threshold must be a positive integer (tokens), got %s", bytes.TrimSpace(v))
			}
			cm.CompactThreshold = &n
		}
		for k := range fields {
			if k != "type" && k != "compact_threshold" {
				return nil, UnknownParameter(param+"."+k, "unknown parameter %q in a context_management entry", k)
			}
		}
		list = append(list, cm)
	}
	return list, nil
}

// CompactThreshold returns the token count past which the conversation is
// compacted before the model's first turn (context_management), and
// whether the request asks for it. Call it on a validated request; of
// several entries with a threshold, the lowest counts.
func (r *Request) CompactThreshold() (int, bool) {
	list, err := r.contextManagement()
	if err != nil {
		return 0, false
	}
	threshold, ok := 0, false
	for _, cm := range list {
		if cm.CompactThreshold != nil && (!ok || *cm.CompactThreshold < threshold) {
			threshold, ok = *cm.CompactThreshold, true
		}
	}
	return threshold, ok
}

// CompactionTriggered reports whether the request's input ends with a
// compaction_trigger: the response compacts the conversation and does
// nothing else.
func (r *Request) CompactionTriggered() bool {
	n := len(r.Input.Items)
	return n > 0 && r.Input.Items[n-1].Type == ItemCompactionTrigger
}

// checkCompactionTrigger refuses a compaction_trigger anywhere in the
// input but last, as OpenAI does: it compacts the context before it.
func (r *Request) checkCompactionTrigger() *APIError {
	for i := range r.Input.Items {
		if r.Input.Items[i].Type == ItemCompactionTrigger && i != len(r.Input.Items)-1 {
			return BadRequest(fmt.Sprintf("input[%d]", i), "compaction_trigger must be the final input item")
		}
	}
	return nil
}
