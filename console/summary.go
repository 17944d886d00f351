package console

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/store"
)

// object is what the console reads of a stored response object.
type object struct {
	Model       string `json:"model"`
	Status      string `json:"status"`
	CreatedAt   int64  `json:"created_at"`
	CompletedAt *int64 `json:"completed_at"`
	Usage       *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []json.RawMessage `json:"output"`
}

// itemHead is what the console reads of an item to name it.
type itemHead struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Name        string `json:"name"`
	ServerLabel string `json:"server_label"`
	CallID      string `json:"call_id"`
	Status      string `json:"status"`
}

// summary is one response as the list shows it.
type summary struct {
	ID, Tenant, Status, Model, TraceID string
	Created                            time.Time
	// Duration is the run's, from its timeline (to the microsecond), or
	// from the object's seconds for a response stored without one; 0
	// when unknown (still running).
	Duration            time.Duration
	InputTokens, Cached int
	OutputTokens        int
	ToolCalls           int
	Error               string
	LeaseOwner          string
	LeaseUntil          time.Time
	timeline            *engine.Timeline
	obj                 object
}

// summarize reads rec's object and timeline; a part that does not decode
// is left out rather than failing the page.
func summarize(rec *store.Record) summary {
	s := summary{ID: rec.ID, Tenant: rec.Tenant, Status: rec.Status, TraceID: rec.TraceID,
		Created: time.Unix(rec.CreatedAt, 0), LeaseOwner: rec.LeaseOwner, LeaseUntil: rec.LeaseUntil}
	_ = json.Unmarshal(rec.Response, &s.obj)
	s.Model = s.obj.Model
	if u := s.obj.Usage; u != nil {
		s.InputTokens, s.Cached, s.OutputTokens = u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens
	}
	for _, raw := range s.obj.Output {
		var h itemHead
		if json.Unmarshal(raw, &h) == nil && isCall(h.Type) {
			s.ToolCalls++
		}
	}
	switch {
	case s.obj.Error != nil:
		s.Error = s.obj.Error.Message
		if s.obj.Error.Code != "" {
			s.Error = s.obj.Error.Code + ": " + s.Error
		}
	case s.obj.IncompleteDetails != nil:
		s.Error = "incomplete: " + s.obj.IncompleteDetails.Reason
	}
	if tl, err := engine.DecodeTimeline(rec.Timeline); err == nil && tl != nil {
		s.timeline = tl
		s.Duration = time.Duration(tl.EndUS) * time.Microsecond
	} else if s.obj.CompletedAt != nil && *s.obj.CompletedAt >= rec.CreatedAt {
		s.Duration = time.Duration(*s.obj.CompletedAt-rec.CreatedAt) * time.Second
	}
	return s
}

// isCall reports whether an output item of type typ is a tool call (a
// function's, a server tool's: mcp_call, web_search_call, ...), not its
// output.
func isCall(typ string) bool {
	return strings.HasSuffix(typ, "_call") && typ != "mcp_list_tools"
}

// CachedShare is the share of the input tokens the engine's cache served,
// as a percentage ("" without input tokens).
func (s summary) CachedShare() string { return share(s.Cached, s.InputTokens) }

func share(part, whole int) string {
	if whole <= 0 {
		return ""
	}
	return fmt.Sprintf("%d%%", part*100/whole)
}

// formatDuration writes d for a person: µs, ms or s with one decimal.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	case d < time.Minute:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}
