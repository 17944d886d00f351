package engine

import (
	"context"
	"fmt"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Compaction within a response (as POST /v1/responses/compact does it
// alone): a request whose input ends with a compaction_trigger gets one
// compaction item as its whole output; a request with context_management
// compact_threshold is compacted before the model's first turn when its
// rendered input passes the threshold, the compaction item first in its
// output, and the model answers from the summary. Either way the
// compaction, sent back or continued with previous_response_id, stands in
// for everything before it (modelInput).

// checkCompaction refuses, before anything is stored, compaction this
// server cannot do: it needs a reasoning key to seal the summary, and an
// upstream that counts tokens for a threshold.
func (e *Engine) checkCompaction(req *responses.Request) error {
	_, threshold := req.CompactThreshold()
	triggered := req.CompactionTriggered()
	if !triggered && !threshold {
		return nil
	}
	param := "context_management"
	if triggered {
		param = fmt.Sprintf("input[%d]", len(req.Input.Items)-1)
	}
	if e.opts.Sealer == nil {
		return responses.Unsupported(param, "this server has no reasoning key configured, so it cannot seal a compaction")
	}
	if threshold && e.opts.Upstream.CountInput == nil {
		return responses.Unsupported("context_management", "this server's upstream cannot count input tokens, so it cannot compact past a threshold")
	}
	return nil
}

// compactOnly answers a compaction_trigger: the conversation before it,
// compacted, is the response's one output item.
func (r *run) compactOnly(ctx context.Context) error {
	item, usage, err := r.compaction(ctx, r.cc.Items())
	r.usage.add(usage)
	if err != nil {
		return r.fail(ctx, err)
	}
	if err := r.builder.AddItem(item); err != nil {
		return err
	}
	return r.builder.Complete(r.usage.total(), r.e.opts.Now().Unix())
}

// compactPastThreshold compacts the conversation when the request asks
// for it past a threshold (context_management) and the first turn's
// rendered input passes it: the compaction item is added to the output,
// and the model goes on from the summary.
func (r *run) compactPastThreshold(ctx context.Context) error {
	threshold, ok := r.req.CompactThreshold()
	if !ok {
		return nil
	}
	n, err := r.e.opts.Upstream.CountInput(ctx, r.modelRequest())
	if err != nil {
		return err
	}
	if n.Tokens <= threshold {
		return nil
	}
	items := r.cc.Items()
	item, usage, err := r.compaction(ctx, items)
	r.usage.add(usage)
	if err != nil {
		return err
	}
	if err := r.builder.AddItem(item); err != nil {
		return err
	}
	summary, err := r.e.openCompaction(&item, "context_management")
	if err != nil {
		return err
	}
	r.cc.Replace(compactedView(items, summary))
	return nil
}

// compactedView is what the model reads after the compaction of items
// within a response: their instructions (system and developer messages),
// the summary, and, verbatim, the last user message and what followed it,
// which the summary covers too but the model is to answer now. A call
// made before that message whose output comes after it (an async call's,
// late) stays too, with the outputs it had (its acknowledgement), before
// the summary, as modelInput keeps it: an output is never shown without
// its call. A later request reads the summary alone in their place
// (modelInput).
func compactedView(items []responses.Item, summary responses.Item) []responses.Item {
	tail := len(items)
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type == responses.ItemMessage && items[i].Role == "user" {
			tail = i
			break
		}
	}
	answeredLater := map[string]bool{}
	for i := range items[tail:] {
		if it := &items[tail+i]; tools.ClientOutput(it.Type) {
			answeredLater[it.CallFields().CallID] = true
		}
	}
	view := make([]responses.Item, 0, len(items)-tail+historyRoom+4)
	for i := range items[:tail] {
		it := &items[i]
		keep := isInstructions(it) ||
			(tools.ClientCall(it.Type) || tools.ClientOutput(it.Type)) && answeredLater[it.CallFields().CallID]
		if keep {
			view = append(view, *it)
		}
	}
	view = append(view, summary)
	return append(view, items[tail:]...)
}
