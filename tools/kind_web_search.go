package tools

import (
	"encoding/json"
	"strings"

	"github.com/loomgate/loom/responses"
)

// KindWebSearch is the web search tool's calls (tools/websearch): each
// search, page opened or pattern found is a web_search_call item, in
// progress from the model's first piece of the arguments (which the
// client does not see), searching once they are complete, completed with
// the action the server gives in Result.Report. A call that failed (no
// search backend configured, a page the fetch policy refused) ends with
// status failed and no completed event, and the model reads why. A call
// that ran outside the stream (after an approval) is reported whole by
// Items, with the same events.
var KindWebSearch = Register(&Kind{
	ItemType: responses.ItemWebSearchCall,
	Forgets:  true,
	Output: func(res Result, text string) (json.RawMessage, string) {
		action := res.Report
		if len(action) == 0 {
			action, _ = json.Marshal(responses.WebSearchAction{Type: responses.WebSearchActionSearch})
		}
		if res.IsError {
			return action, failure(text)
		}
		return action, ""
	},
	Items: func(c RanCall, res Result, text string, newID func(string) string) []responses.Item {
		action := res.Report
		if len(action) == 0 {
			action = webSearchAction(c.Tool, c.Arguments)
		}
		item := responses.Item{Type: responses.ItemWebSearchCall, ID: newID("ws"), Tool: &responses.ItemTool{Action: action}, Status: responses.StatusCompleted}
		if res.IsError {
			item.Status = responses.ResponseFailed
		}
		return []responses.Item{item}
	},
	ItemEvents: func(it responses.Item) []string {
		if it.Type != responses.ItemWebSearchCall {
			return nil
		}
		if it.Status != responses.StatusCompleted {
			// The API has no failed event for a web search: the item's
			// status says it.
			return []string{responses.EventWebSearchCallInProgress, responses.EventWebSearchCallSearching}
		}
		return []string{responses.EventWebSearchCallInProgress, responses.EventWebSearchCallSearching, responses.EventWebSearchCallCompleted}
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemWebSearchCall: func(it responses.Item) []responses.Item {
			// The item keeps what was searched and, when the client asked
			// for them, the sources; not the text the model read then.
			var a responses.WebSearchAction
			json.Unmarshal(it.ToolFields().Action, &a)
			note := "web search " + a.Type
			if it.Status != responses.StatusCompleted {
				note += " failed"
			}
			note += "; its results are not kept, search again if you need them"
			if len(a.Sources) > 0 {
				urls := make([]string, len(a.Sources))
				for i, s := range a.Sources {
					urls[i] = s.URL
				}
				note += ". Sources: " + strings.Join(urls, ", ")
			}
			args := string(it.ToolFields().Action)
			if args == "" {
				args = "{}"
			}
			return CallPair(it.ID, it.ID, WebSearchFunction, args, note)
		},
	},
})

// WebSearchFunction is the function the web search tool is offered as on
// a backend without gpt-oss's built-in browser (chat completions).
const WebSearchFunction = "web_search"

// webSearchAction is the action of a call whose server reported none: the
// model's arguments read by the tool it called.
func webSearchAction(tool, arguments string) json.RawMessage {
	var args struct {
		Query   string `json:"query"`
		ID      any    `json:"id"`
		Pattern string `json:"pattern"`
	}
	json.Unmarshal([]byte(arguments), &args)
	a := responses.WebSearchAction{Type: responses.WebSearchActionSearch, Query: args.Query}
	switch {
	case strings.HasSuffix(tool, ".open"):
		a = responses.WebSearchAction{Type: responses.WebSearchActionOpenPage}
		if u, ok := args.ID.(string); ok {
			a.URL = u
		}
	case strings.HasSuffix(tool, ".find"):
		a = responses.WebSearchAction{Type: responses.WebSearchActionFind, Pattern: args.Pattern}
	}
	out, _ := json.Marshal(a)
	return out
}
