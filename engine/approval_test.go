package engine

import (
	"testing"

	"github.com/loomgate/loom/responses"
)

func TestCheckApprovals(t *testing.T) {
	str := func(s string) *string { return &s }
	yes := true
	request := func(id, name, args string) responses.Item {
		return responses.Item{Type: responses.ItemMCPApprovalRequest, ID: id, Tool: &responses.ItemTool{ServerLabel: "s"}, Call: &responses.ItemCall{Name: name, Arguments: args}}
	}
	answer := func(id string) responses.Item {
		return responses.Item{Type: responses.ItemMCPApprovalResponse, Tool: &responses.ItemTool{ApprovalRequestID: str(id), Approve: &yes}}
	}
	user := responses.Item{Type: responses.ItemMessage, Role: "user"}
	chain := []responses.Item{user, request("r1", "a", `{"x":1}`)}
	tests := []struct {
		name     string
		history  []responses.Item
		input    []responses.Item
		param    string // "" when accepted
		wantArgs string
	}{
		{"first answer", chain, []responses.Item{answer("r1")}, "", `{"x":1}`},
		{"answered twice in one input", chain, []responses.Item{answer("r1"), answer("r1")}, "input[1].approval_request_id", ""},
		{"already answered", append(chain, answer("r1")), []responses.Item{answer("r1")}, "input[0].approval_request_id", ""},
		{"unknown request", chain, []responses.Item{answer("r2")}, "input[0].approval_request_id", ""},
		{"restated unchanged", chain, []responses.Item{request("r1", "a", `{"x":1}`), answer("r1")}, "", `{"x":1}`},
		{"restated with other arguments", chain, []responses.Item{request("r1", "a", `{"x":666}`), answer("r1")}, "input[0]", ""},
		{"restated for another tool", chain, []responses.Item{request("r1", "b", `{"x":1}`), answer("r1")}, "input[0]", ""},
		{"made up in a chain", chain, []responses.Item{request("r9", "b", `{}`), answer("r9")}, "input[0].id", ""},
		{"whole conversation, no chain", nil, []responses.Item{user, request("r1", "a", `{"x":2}`), answer("r1")}, "", `{"x":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkApprovals(tt.history, tt.input)
			if tt.param != "" {
				apiErr, ok := err.(*responses.APIError)
				if !ok || apiErr.Param != tt.param {
					t.Fatalf("err %v, want a 400 on %s", err, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].request.CallFields().Arguments != tt.wantArgs || !got[0].approve {
				t.Fatalf("approvals %+v, want one for %s", got, tt.wantArgs)
			}
		})
	}
}
