package responses

import (
	"slices"
	"sync"
)

// MarshalJSON writes the response in the OpenAI dialect, as AppendJSON
// does.
func (r Response) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil, DialectOpenAI), nil }

// AppendJSON appends the response object in dialect d to dst: every key
// of the schema in its order, pointer fields null when unset, the output
// items named for d (the Open Responses schema knows only function tools,
// so only those are echoed there). The echo of the request's tools is
// encoded once per response and reused by every event that carries the
// response and by the body (see responseEcho).
func (r *Response) AppendJSON(dst []byte, d Dialect) []byte {
	o := openObject(dst)
	o.str("id", r.ID)
	o.str("object", r.Object)
	o.int("created_at", r.CreatedAt)
	if r.CompletedAt != nil {
		o.int("completed_at", *r.CompletedAt)
	} else {
		o.null("completed_at")
	}
	o.str("status", r.Status)
	if details, ok := o.objectOrNull("incomplete_details", r.IncompleteDetails != nil); ok {
		details.str("reason", r.IncompleteDetails.Reason)
		o.b = details.close()
	}
	o.str("model", r.Model)
	o.strOrNull("previous_response_id", r.PreviousResponseID)
	o.key("instructions")
	o.b = r.appendInstructions(o.b)
	o.key("output")
	if r.Output == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i := range r.Output {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = r.Output[i].appendJSON(o.b, d)
		}
		o.b = append(o.b, ']')
	}
	if e, ok := o.objectOrNull("error", r.Error != nil); ok {
		e.str("code", r.Error.Code)
		e.str("message", r.Error.Message)
		o.b = e.close()
	}
	o.key("tools")
	o.b = r.appendTools(o.b, d)
	o.key("tool_choice")
	o.b = r.ToolChoice.appendJSON(o.b)
	o.str("truncation", r.Truncation)
	o.boolean("parallel_tool_calls", r.ParallelToolCalls)
	o.key("text")
	o.b = r.Text.appendJSON(o.b)
	o.float("top_p", r.TopP)
	o.float("presence_penalty", r.PresencePenalty)
	o.float("frequency_penalty", r.FrequencyPenalty)
	o.int("top_logprobs", int64(r.TopLogprobs))
	o.float("temperature", r.Temperature)
	if rp, ok := o.objectOrNull("reasoning", r.Reasoning != nil); ok {
		rp.strOrNull("effort", r.Reasoning.Effort)
		rp.strOrNull("summary", r.Reasoning.Summary)
		o.b = rp.close()
	}
	o.key("usage")
	o.b = r.Usage.appendJSON(o.b)
	o.intOrNull("max_output_tokens", r.MaxOutputTokens)
	o.intOrNull("max_tool_calls", r.MaxToolCalls)
	o.boolean("store", r.Store)
	o.boolean("background", r.Background)
	o.str("service_tier", r.ServiceTier)
	o.key("metadata")
	o.b = appendMetadata(o.b, r.Metadata)
	o.strOrNull("safety_identifier", r.SafetyIdentifier)
	o.strOrNull("prompt_cache_key", r.PromptCacheKey)
	o.strOmitNil("user", r.User)
	o.rawOmitEmpty("conversation", r.Conversation)
	return o.close()
}

// appendJSON writes the usage, null when there is none yet.
func (u *Usage) appendJSON(dst []byte) []byte {
	if u == nil {
		return append(dst, "null"...)
	}
	o := openObject(dst)
	o.int("input_tokens", int64(u.InputTokens))
	o.key("input_tokens_details")
	in := openObject(o.b)
	in.int("cached_tokens", int64(u.InputTokensDetails.CachedTokens))
	o.b = in.close()
	o.int("output_tokens", int64(u.OutputTokens))
	o.key("output_tokens_details")
	out := openObject(o.b)
	out.int("reasoning_tokens", int64(u.OutputTokensDetails.ReasoningTokens))
	o.b = out.close()
	o.int("total_tokens", int64(u.TotalTokens))
	return o.close()
}

// appendMetadata writes metadata with its keys sorted, as encoding/json
// writes a map (null for none). Validation allows only string values;
// another (from a stored response) goes through encoding/json.
func appendMetadata(dst []byte, m map[string]any) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		if s, ok := m[k].(string); ok {
			dst = appendString(dst, s)
			continue
		}
		var err error
		if dst, err = appendMarshal(dst, m[k]); err != nil {
			dst = append(dst, "null"...)
		}
	}
	return append(dst, '}')
}

// responseEcho keeps the encoding of a response's tools and of long
// instructions, the largest parts of the request it echoes (100 tools with
// their schemas are tens of kilobytes), so that response.created, response.in_progress, the
// terminal event and the body share one encoding. NewBuilder gives a
// response one; a response without one (decoded from the store) encodes
// its tools each time.
type responseEcho struct {
	mu    sync.Mutex
	tools [2]echoedTools // by dialect
	// instructions is the encoding of long instructions (an agent's
	// system prompt runs to tens of kilobytes), of the string at
	// instructionsOf.
	instructions   []byte
	instructionsOf *string
}

// echoedTools is the encoding of one tools list, in one dialect.
type echoedTools struct {
	of   *Tool // the list it encodes: its first element and length
	n    int
	json []byte
}

// appendTools appends the tools list in dialect d (only function tools
// in the Open Responses dialect): the remembered encoding when it is of
// this very list, else a new one, remembered.
func (r *Response) appendTools(dst []byte, d Dialect) []byte {
	if r.Tools == nil {
		return append(dst, "null"...)
	}
	if r.echo == nil || int(d) >= len(r.echo.tools) {
		return appendToolList(dst, r.Tools, d)
	}
	r.echo.mu.Lock()
	defer r.echo.mu.Unlock()
	c := &r.echo.tools[d]
	var first *Tool
	if len(r.Tools) > 0 {
		first = &r.Tools[0]
	}
	if c.json == nil || c.of != first || c.n != len(r.Tools) {
		c.json = appendToolList(c.json[:0], r.Tools, d)
		c.of, c.n = first, len(r.Tools)
	}
	return append(slices.Grow(dst, len(c.json)+afterTools), c.json...)
}

// appendToolList writes tools as a list; a tool that cannot be echoed
// (its raw form is not an object) is left out.
func appendToolList(dst []byte, tools []Tool, d Dialect) []byte {
	// Sized once: a hundred tools with their schemas would otherwise
	// grow the buffer a dozen times.
	size := 2
	for i := range tools {
		t := &tools[i]
		// {"type":"function","name":,"description":,"parameters":,"strict":null},
		size += 80 + len(t.Name) + len(t.Parameters) + len(t.Raw)
		if t.Description != nil {
			size += len(*t.Description)
		}
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, '[')
	n := 0
	for i := range tools {
		if d == DialectOpenResponses && tools[i].Type != ToolFunction {
			continue
		}
		mark := len(dst)
		if n > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = tools[i].appendJSON(dst); err != nil {
			dst = dst[:mark]
			continue
		}
		n++
	}
	return append(dst, ']')
}

// afterTools is room for what a response writes after its tools
// (tool_choice to conversation: ~450 bytes without metadata), made when
// the buffer grows for the kept encoding of them: append grew it to just
// hold them, and the next few bytes grew it again, a copy of the whole
// response so far (~25 KB for a hundred tools). appendToolList's guess
// of their size leaves room enough.
const afterTools = 512

// longInstructions is the length from which the encoding of instructions
// is kept rather than written again for each event.
const longInstructions = 1 << 10

// appendInstructions appends the instructions (null for none): the
// remembered encoding when they are long and the same string.
func (r *Response) appendInstructions(dst []byte) []byte {
	switch {
	case r.Instructions == nil:
		return append(dst, "null"...)
	case r.echo == nil || len(*r.Instructions) < longInstructions:
		return appendString(dst, *r.Instructions)
	}
	r.echo.mu.Lock()
	defer r.echo.mu.Unlock()
	if r.echo.instructionsOf != r.Instructions {
		r.echo.instructions = appendString(r.echo.instructions[:0], *r.Instructions)
		r.echo.instructionsOf = r.Instructions
	}
	return append(dst, r.echo.instructions...)
}
