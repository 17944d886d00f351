package tools

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// KindMCP is an MCP server's calls: mcp_call items, streamed as the model
// writes the arguments, the server's tools listed in mcp_list_tools.
var KindMCP = Register(&Kind{
	ItemType:   responses.ItemMCPCall,
	ListsTools: true,
	Output: func(res Result, text string) (json.RawMessage, string) {
		if res.IsError {
			return nil, failure(text)
		}
		out, _ := json.Marshal(text)
		return out, ""
	},
	Items: func(c RanCall, res Result, text string, newID func(string) string) []responses.Item {
		item := responses.Item{Type: responses.ItemMCPCall, ID: newID("mcp"), Tool: &responses.ItemTool{ServerLabel: c.Server},
			Call: &responses.ItemCall{Name: c.Tool, Arguments: c.Arguments}, Status: responses.StatusCompleted}
		if c.ApprovalRequestID != "" {
			id := c.ApprovalRequestID
			item.EditTool().ApprovalRequestID = &id
		}
		if res.IsError {
			msg := failure(text)
			item.EditTool().Error, item.Status = &msg, "failed"
		} else {
			item.EditCall().Output, _ = json.Marshal(text)
		}
		return []responses.Item{item}
	},
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemMCPCall: func(it responses.Item) []responses.Item {
			if it.Status == responses.StatusIncomplete && it.ToolFields().Error == nil && (len(it.CallFields().Output) == 0 || string(it.CallFields().Output) == "null") {
				// A call that waited for the client's input: it reaches
				// the model when it finishes, in the follow-up.
				return nil
			}
			result := it.CallFields().Output
			if it.ToolFields().Error != nil {
				result, _ = json.Marshal("error: " + *it.ToolFields().Error)
			}
			return storedPair(it.ID, it.ID, it.CallFields().Name, it.CallFields().Arguments, result)
		},
		// Bookkeeping between loom and the client: an approved call
		// reaches the model when it runs.
		responses.ItemMCPListTools:        nil,
		responses.ItemMCPApprovalRequest:  nil,
		responses.ItemMCPApprovalResponse: nil,
		responses.ItemMCPInputRequest:     nil,
		responses.ItemMCPInputResponse:    nil,
	},
})

// failure is the error text of a failed call.
func failure(text string) string {
	if text == "" {
		return "the tool failed"
	}
	return text
}
