package engine

import (
	"context"

	"github.com/loomgate/loom/tools"
)

// resolveInput runs the multi-round request (MRTR) of a server call that
// answered input_required: it answers the server's input requests
// (sampling by the upstream model, roots from configuration, elicitation
// by the server's policy) and retries the call with inputResponses and the
// byte-exact requestState, for a bounded number of rounds. It returns the
// final result. A result still carrying InputRequired means the input must
// come from the Responses client: the response then ends with an
// mcp_input_request item.
//
// TODO(#5): not implemented yet; the call fails with a clear message.
func (r *run) resolveInput(ctx context.Context, call tools.Call, server string, res tools.Result) tools.Result {
	return tools.ErrorResult(call.CallID, "the tool server asked for more input, which this server cannot provide yet", nil)
}

// resumeInputs answers mcp_input_response items of the request's input:
// the calls they resume run before the model's first turn.
//
// TODO(#5): not implemented yet.
func (r *run) resumeInputs(ctx context.Context) error { return nil }
