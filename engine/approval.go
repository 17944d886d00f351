package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// approval is the client's answer to an approval request of the chain.
type approval struct {
	request responses.Item // the mcp_approval_request it answers
	approve bool
	reason  string
}

// checkApprovals matches the input's mcp_approval_response items to the
// approval requests of the conversation: history is the stored chain that
// previous_response_id continues, input this request's items. An answer to
// no request, or to a request already answered, is a 400: an approval is
// bound to the one call (server, tool and arguments) it was asked for, and
// is used once.
//
// When the request continues a stored chain, only the approval requests
// loom stored in it count: an mcp_approval_request the client sends along
// must be one of them, unchanged, or the request is refused, so that a
// client cannot restate a request with other arguments (or make one up)
// and approve that. Without a chain, the client sends the whole
// conversation, and its mcp_approval_request items are all there is.
func checkApprovals(history, input []responses.Item) ([]approval, error) {
	for i := range input { // in place, not a copy of each item
		if t := input[i].Type; t == responses.ItemMCPApprovalRequest || t == responses.ItemMCPApprovalResponse {
			return matchApprovals(history, input)
		}
	}
	// Nothing to match (as in nearly every request): the history is not
	// walked, and matchApprovals' maps, which live in its ~3 KB stack
	// frame, are not made. That frame would otherwise be part of the
	// deepest path of every request, which sets the size of the stack a
	// streaming handler keeps while it waits.
	return nil, nil
}

// matchApprovals is checkApprovals for an input that holds approval
// requests or answers.
func matchApprovals(history, input []responses.Item) ([]approval, error) {
	requests := map[string]responses.Item{}
	answered := map[string]bool{}
	// The loops look at items in place: a long history's are ~100 bytes
	// each, and almost none is an approval.
	for i := range history {
		it := &history[i]
		switch it.Type {
		case responses.ItemMCPApprovalRequest:
			if _, dup := requests[it.ID]; !dup {
				requests[it.ID] = *it
			}
		case responses.ItemMCPApprovalResponse:
			if it.ToolFields().ApprovalRequestID != nil {
				answered[*it.ToolFields().ApprovalRequestID] = true
			}
		}
	}
	chained := len(history) > 0
	for i := range input {
		it := &input[i]
		if it.Type != responses.ItemMCPApprovalRequest {
			continue
		}
		known, ok := requests[it.ID]
		switch {
		case ok && (known.ToolFields().ServerLabel != it.ToolFields().ServerLabel || known.CallFields().Name != it.CallFields().Name || known.CallFields().Arguments != it.CallFields().Arguments):
			return nil, responses.BadRequest(fmt.Sprintf("input[%d]", i), "%s %q differs from the request this server made", responses.ItemMCPApprovalRequest, it.ID)
		case !ok && chained:
			return nil, responses.BadRequest(fmt.Sprintf("input[%d].id", i), "no approval request %q was made in this conversation", it.ID)
		case !ok:
			requests[it.ID] = *it
		}
	}
	var out []approval
	for i := range input {
		it := &input[i]
		if it.Type != responses.ItemMCPApprovalResponse {
			continue
		}
		tool := it.ToolFields()
		req, err := answerOnce(requests, answered, *tool.ApprovalRequestID, fmt.Sprintf("input[%d].approval_request_id", i), "approval request")
		if err != nil {
			return nil, err
		}
		a := approval{request: req, approve: *tool.Approve}
		if tool.Reason != nil {
			a.reason = *tool.Reason
		}
		out = append(out, a)
	}
	return out, nil
}

// answerOnce finds the request that an answer in the input is for (an
// approval, an input request: what names it in the message) among the
// requests of the conversation, by id. Each is answered once: a request
// answered before, in the stored history or earlier in the input, is a 400
// naming param, as is an id the conversation has no request for. The
// request then counts as answered.
func answerOnce[R any](requests map[string]R, answered map[string]bool, id, param, what string) (R, error) {
	req, ok := requests[id]
	switch {
	case !ok:
		return req, responses.BadRequest(param, "no %s %q is waiting for an answer in this conversation", what, id)
	case answered[id]:
		return req, responses.BadRequest(param, "%s %q was already answered", what, id)
	}
	answered[id] = true
	return req, nil
}

// listItems reports, once per conversation, the tools of each MCP server
// as an mcp_list_tools item; a server that could not be listed gets an item
// carrying the error, and the response goes on without its tools. A
// server already listed in the stored chain or in the input (a client
// that resends the whole history, as Codex and the Agents SDK do) is not
// listed again.
func (r *run) listItems(listErr error) error {
	if len(r.reg.Servers()) == 0 {
		return nil // nothing to list (and no maps to build for it)
	}
	listed := map[string]bool{}
	for _, items := range [][]responses.Item{r.history, r.input} {
		for _, it := range items {
			if it.Type == responses.ItemMCPListTools {
				listed[it.ToolFields().ServerLabel] = true
			}
		}
	}
	failed := map[string]string{}
	var se *conversation.SessionError
	for _, err := range unjoin(listErr) {
		if errors.As(err, &se) {
			failed[se.Server] = "the server's tools could not be listed"
			if why, ok := tools.Reason(err); ok {
				failed[se.Server] += ": " + why
			}
		}
	}
	for _, s := range r.reg.Servers() {
		label := s.Name()
		if !r.caps(label).KindOf().ListsTools || listed[label] {
			continue
		}
		item := responses.Item{Type: responses.ItemMCPListTools, ID: r.e.opts.NewID("mcpl"), Tool: &responses.ItemTool{ServerLabel: label}}
		if msg, ok := failed[label]; ok {
			item.EditTool().Error = &msg
			if err := r.builder.AddItemEvents(item, responses.EventMCPListToolsInProgress, responses.EventMCPListToolsFailed); err != nil {
				return err
			}
			continue
		}
		type listed struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			InputSchema json.RawMessage `json:"input_schema"`
			Annotations json.RawMessage `json:"annotations"`
		}
		list := []listed{}
		for _, d := range r.cc.Offered() {
			if d.Server != label {
				continue
			}
			schema, ann := d.Parameters, d.Annotations()
			if len(schema) == 0 {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			if len(ann) == 0 {
				ann = json.RawMessage("null")
			}
			list = append(list, listed{r.caps(label).OwnName(d.Name), d.Description, schema, ann})
		}
		item.EditTool().Tools, _ = json.Marshal(list)
		if err := r.builder.AddItemEvents(item, responses.EventMCPListToolsInProgress, responses.EventMCPListToolsCompleted); err != nil {
			return err
		}
	}
	return nil
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// runApprovals runs the calls the client approved in this request and
// tells the model of those it denied, before the model's first turn.
func (r *run) runApprovals(ctx context.Context) error {
	for _, a := range r.approvals {
		req := a.request
		offered := r.offeredName(req.ToolFields().ServerLabel, req.CallFields().Name)
		approvalAnswered(ctx, &a, offered)
		callID := req.ID
		if offered == "" {
			return responses.BadRequest("tools", "the approved call is to server %q, which this request does not offer; send its mcp tool again", req.ToolFields().ServerLabel)
		}
		result := "the user denied this call"
		if a.reason != "" {
			result += ": " + a.reason
		}
		if !a.approve {
			// Nothing ran: a mark on the timeline, at the time it was
			// told to the model.
			now := time.Now()
			r.timeline.add(TimelineStep{Kind: StepApproval, Name: offered, Server: req.ToolFields().ServerLabel, CallID: callID,
				Error: result}, now, now)
		}
		if a.approve {
			call := tools.Call{CallID: callID, Name: offered, Arguments: req.CallFields().Arguments}
			res := r.cc.Call(ctx, []tools.Call{call})[0]
			began := res.Start
			if res.InputRequired != nil {
				st := &callState{call: call, server: req.ToolFields().ServerLabel, approval: req.ID}
				res = r.rounds(ctx, st, res)
			}
			if res.InputRequired != nil {
				// The approved call waits for the client's input.
				r.timeCall(StepApproval, req.ToolFields().ServerLabel, call, "", began, res)
				if err := r.askClient(callID, ""); err != nil {
					return err
				}
				continue
			}
			result = resultText(res)
			ran := tools.RanCall{Server: req.ToolFields().ServerLabel, Tool: req.CallFields().Name, CallID: callID, Arguments: req.CallFields().Arguments, ApprovalRequestID: req.ID}
			items, err := r.addRanItems(r.caps(req.ToolFields().ServerLabel).KindOf(), ran, res, result)
			if err != nil {
				return err
			}
			// The step shows the call's item, which says it was approved.
			r.timeCall(StepApproval, req.ToolFields().ServerLabel, call, items[0].ID, began, res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		r.cc.Append(tools.CallPair("", callID, offered, req.CallFields().Arguments, result)...)
	}
	return nil
}

// offeredName is the name under which a server offers its tool, or "".
func (r *run) offeredName(label, tool string) string {
	for _, d := range r.cc.Offered() {
		if d.Server == label && r.caps(label).OwnName(d.Name) == tool {
			return d.Name
		}
	}
	return ""
}
