package responses

import "encoding/json"

// Tool types of the web search tool: the current name, the preview name
// and their dated aliases, all served alike.
const (
	ToolWebSearch                = "web_search"
	ToolWebSearch20250826        = "web_search_2025_08_26"
	ToolWebSearchPreview         = "web_search_preview"
	ToolWebSearchPreview20250311 = "web_search_preview_2025_03_11"
	// IncludeWebSearchSources in include[] adds the sources of each
	// search to its action.
	IncludeWebSearchSources      = "web_search_call.action.sources"
	ItemWebSearchCall            = "web_search_call"
	EventWebSearchCallInProgress = "response.web_search_call.in_progress"
	EventWebSearchCallSearching  = "response.web_search_call.searching"
	EventWebSearchCallCompleted  = "response.web_search_call.completed"
	WebSearchActionSearch        = "search"
	WebSearchActionOpenPage      = "open_page"
	WebSearchActionFind          = "find_in_page"
	WebSearchSourceURL           = "url"
)

// WebSearchTypes are the request tool types of the web search tool.
var WebSearchTypes = []string{ToolWebSearch, ToolWebSearch20250826, ToolWebSearchPreview, ToolWebSearchPreview20250311}

// WebSearchTool is a {"type": "web_search"} entry of a request's tools (or
// one of its aliases): the fields loom acts on.
type WebSearchTool struct {
	// ExternalWebAccess false means search only: no live page is opened.
	ExternalWebAccess *bool `json:"external_web_access"`
	Filters           *struct {
		AllowedDomains []string `json:"allowed_domains"`
	} `json:"filters"`
	SearchContextSize string `json:"search_context_size"`
}

// DecodeWebSearchTool reads a web search tool's fields from its raw form.
func DecodeWebSearchTool(raw json.RawMessage) (WebSearchTool, error) {
	var t WebSearchTool
	if len(raw) == 0 {
		return t, nil
	}
	err := json.Unmarshal(raw, &t)
	return t, err
}

// LiveAccess reports whether the tool may open live pages
// (external_web_access, true unless set false).
func (t WebSearchTool) LiveAccess() bool {
	if t.ExternalWebAccess == nil {
		return true
	}
	return *t.ExternalWebAccess
}

// WebSearchAction is the action of a web_search_call item: a search (with
// its sources when include asks for them), a page opened, or a pattern
// found in a page.
type WebSearchAction struct {
	Type    string            `json:"type"`
	Query   string            `json:"query,omitempty"`
	Queries []string          `json:"queries,omitempty"`
	Sources []WebSearchSource `json:"sources,omitempty"`
	URL     string            `json:"url,omitempty"`
	Pattern string            `json:"pattern,omitempty"`
}

// WebSearchSource is one source a search consulted.
type WebSearchSource struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// appendWebSearch writes a web_search_call: its action and status, not
// the arguments the model wrote.
func (it *Item) appendWebSearch(o *jsonObject) {
	o.str("id", it.ID)
	o.str("status", orDefault(it.Status, StatusCompleted))
	o.raw("action", it.ToolFields().Action, `{"type":"search"}`)
}
