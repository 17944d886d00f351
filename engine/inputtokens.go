package engine

import (
	"context"
	"errors"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// InputTokens counts the input tokens of the first model turn that req
// would run, without running it: the same checks as Run (a bad request is
// the same 400), the same conversation (previous_response_id, tools,
// instructions), then the backend's count. Nothing is stored. MCP servers
// may be listed (their tools are part of the prompt); no tool is called.
func (e *Engine) InputTokens(ctx context.Context, req *responses.Request) (model.InputCount, error) {
	if e.opts.Upstream.CountInput == nil {
		return model.InputCount{}, &responses.APIError{Kind: responses.ENotImplemented, Type: responses.ErrInvalidRequest, Code: "unsupported",
			Message: "this server's upstream cannot count input tokens"}
	}
	r, err := e.prepare(ctx, req, nil, nil)
	if err != nil {
		return model.InputCount{}, err
	}
	r.openConversation()
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	defer r.cc.Close(ctx)
	if err := r.cc.Init(ctx); err != nil {
		// As in Run: a server that cannot be listed is left out.
		e.log.Warn("tool listing failed", "err", err)
	}
	n, err := e.opts.Upstream.CountInput(ctx, r.modelRequest())
	if err != nil {
		return model.InputCount{}, inputError(err)
	}
	return n, nil
}

// inputError maps a backend's failure to render or count a request's
// input without a response around it (input_tokens, compact): input it
// cannot render is the request's fault, anything else the upstream's.
func inputError(err error) error {
	var me *responses.APIError
	if errors.As(err, &me) && me.Kind == responses.EInvalid {
		return responses.BadRequest("input", "%s", me.Message)
	}
	return upstreamFailure(err)
}
