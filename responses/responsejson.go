package responses

import "slices"

// MarshalJSON writes the response in the OpenAI dialect, as AppendJSON
// does.
func (r Response) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil, DialectOpenAI), nil }

// AppendJSON appends the response object in dialect d to dst: every key
// of the schema in its order, pointer fields null when unset, the output
// items named for d (the Open Responses schema knows only function tools,
// so only those are echoed there).
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
	o.strOrNull("instructions", r.Instructions)
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
	if r.Tools == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = appendToolList(o.b, r.Tools, d)
	}
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
