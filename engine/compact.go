package engine

import (
	"context"
	"slices"
	"strings"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// compactInstructions ask the model for the summary that replaces the
// conversation. The summary is all the next turns will know of it, so it
// must keep what they need.
const compactInstructions = `You compact conversations. Write a summary of the conversation so far that lets you continue it without the original messages: the user's goals and constraints, the facts, decisions and results established (tool results included), and what is still open or was asked last. Be concise but keep names, numbers, identifiers and code that later turns may need. Write only the summary.`

// compactRequest is the last message of the compaction turn.
const compactRequest = "Summarise the conversation above for your own later use, as instructed."

// compactionPreamble opens the message that stands in for a compacted
// conversation, so the model reads the summary as history, not as a new
// request.
const compactionPreamble = "Summary of the earlier conversation, which was compacted:\n\n"

// Compact summarises a conversation (the request's input after what
// previous_response_id continues) with the model, and returns the
// compaction: one compaction item whose encrypted_content is the summary
// sealed with the reasoning key, so any replica holding the key opens it.
// Sent back as input, it puts the summary in the prompt in place of the
// compacted turns. Nothing is stored.
func (e *Engine) Compact(ctx context.Context, req *responses.Request) (*responses.Compaction, error) {
	if strings.TrimSpace(req.Model) == "" {
		return nil, responses.BadRequest("model", "model is required")
	}
	if e.opts.Sealer == nil {
		return nil, responses.Unsupported("", "this server has no reasoning key configured, so it cannot seal a compaction")
	}
	if len(req.Tools) > 0 {
		return nil, responses.Unsupported("tools", "compact takes no tools")
	}
	r, err := e.prepare(ctx, req, nil, nil)
	if err != nil {
		return nil, err
	}
	r.openConversation()
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	defer r.cc.Close(ctx)
	item, usage, err := r.compaction(ctx, r.cc.Items())
	if err != nil {
		return nil, err
	}
	return &responses.Compaction{
		ID:        e.opts.NewID("resp"),
		Object:    "response.compaction",
		CreatedAt: e.opts.Now().Unix(),
		Output:    []responses.Item{item},
		Usage:     usage,
	}, nil
}

// compaction summarises items, the conversation as the model reads it,
// with the model, and returns the compaction item that stands in for
// them (its summary sealed) and the usage of the summary's turn.
func (r *run) compaction(ctx context.Context, items []responses.Item) (responses.Item, responses.Usage, error) {
	req := r.req
	items = append(slices.Clip(items), responses.Item{Type: responses.ItemMessage, Role: "user",
		Content: []responses.ContentPart{{Type: responses.PartInputText, Text: compactRequest}}})
	// The summary is not streamed to anyone: it is asked for whole.
	mreq := &model.Request{Model: req.Model, Instructions: compactInstructions, Items: items, Whole: true, Route: r.route()}
	if req.Instructions != nil && *req.Instructions != "" {
		// The caller's instructions framed the conversation: the summary
		// keeps them in view.
		mreq.Instructions += "\n\nThe conversation ran under these instructions:\n" + *req.Instructions
	}
	var summary strings.Builder
	var usage responses.Usage
	finish := ""
	cctx, cs := r.startChat(ctx, mreq, purposeCompaction)
	err := r.e.backend.Stream(cctx, mreq, func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaText:
			summary.WriteString(d.Text)
		case model.DeltaUsage:
			usage.Add(d.Usage)
		case model.DeltaFinish:
			finish = d.FinishReason
		}
		return nil
	})
	var out []responses.Item
	if r.e.opts.CaptureContent {
		out = []responses.Item{{Type: responses.ItemMessage, Role: "assistant", Content: []responses.ContentPart{responses.OutputText(summary.String())}}}
	}
	r.endChat(cs, mreq.Model, usage, finish, out, err)
	if err != nil {
		return responses.Item{}, usage, inputError(err)
	}
	text := strings.TrimSpace(summary.String())
	if text == "" {
		return responses.Item{}, usage, &responses.APIError{Kind: responses.EUpstream, Type: responses.ErrUpstream, Code: "upstream_error",
			Message: "the model wrote no summary"}
	}
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens
	sealed := r.e.opts.Sealer.SealCompaction(text)
	return responses.Item{Type: responses.ItemCompaction, ID: r.e.opts.NewID("cmp"), Reasoning: &responses.ItemReasoningFields{EncryptedContent: &sealed}}, usage, nil
}

// openCompaction returns the message that stands in for a compaction
// item: its summary, opened. param names the item for the 400 of a blob
// that does not open.
func (cr *core) openCompaction(it *responses.Item, param string) (responses.Item, error) {
	if cr.opts.Sealer == nil {
		return responses.Item{}, responses.BadRequest(param, "this server has no reasoning key, so it cannot open a compaction")
	}
	blob := ""
	if it.ReasoningFields().EncryptedContent != nil {
		blob = *it.ReasoningFields().EncryptedContent
	}
	summary, err := cr.opts.Sealer.OpenCompaction(blob)
	if err != nil {
		return responses.Item{}, responses.BadRequest(param, "%v", err)
	}
	return responses.Item{Type: responses.ItemMessage, ID: it.ID, Role: "user",
		Content: []responses.ContentPart{{Type: responses.PartInputText, Text: compactionPreamble + summary}}}, nil
}
