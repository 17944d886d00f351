// Package chat is the model.Backend over an OpenAI chat-completions
// endpoint (POST {baseURL}/chat/completions), the one API that vLLM,
// SGLang, llama.cpp and Ollama all serve.
//
// # Requests
//
// A model.Request becomes one streaming chat-completions request
// (stream true, stream_options.include_usage true, so the stream ends
// with token counts). The conversation items fold into chat messages:
//
//   - Instructions become a system message, first.
//   - user and system messages keep their role; developer messages are
//     sent as system, because many engines' chat templates reject or
//     ignore the developer role. Text parts are joined; a message with
//     images uses the array form of content.
//   - An assistant message carries the reasoning items just before it as
//     reasoning_content, where reasoning models' chat templates look for
//     it. Reasoning that no assistant message follows is dropped.
//   - function_call items become tool_calls; consecutive calls, and the
//     assistant text right before them, share one assistant message, the
//     shape engines produce and their templates expect.
//   - function_call_output items become tool messages with tool_call_id.
//
// Function tools are sent with their JSON schema as is. When the request
// offers no tools, the body has neither "tools" nor "tool_choice": an
// empty list once made vLLM fall back to tool_choice auto, and models
// invented calls. parallel_tool_calls is sent only as false, only with
// tools. MaxOutputTokens is sent as max_tokens: every engine here accepts
// it (vLLM and SGLang also take max_completion_tokens, but llama.cpp and
// Ollama read max_tokens), and for these engines both count reasoning
// tokens too, which is what Responses' max_output_tokens means.
// Temperature and the other sampling values are sent when set, zero
// included. Text formats map to response_format. Request.Extra is merged
// into the body last; it may add or override keys, except model, messages,
// stream, stream_options, tools and tool_choice.
//
// The nested wire objects (messages, tools, tool_choice, response_format,
// usage, the streamed delta) are go-openai's types: the body has their
// keys, in their order, with their omissions. It is written by hand in
// one pass from the Request (request.go, messages.go), and
// TestBodyMatchesGoOpenAI holds it to what go-openai's types and
// encoding/json write, as decoded JSON: encoding through them cost a
// reflection walk of every message and tool and a compaction of every
// schema, 1 ms for a 1000-message history and 0.3 ms for 100 tools,
// against 0.14 ms and 0.02 ms by hand (BenchmarkEncodeRequest). Schemas
// (tool parameters, a json_schema format) go out as the bytes the
// Responses decoding checked, so a Request built by a program must carry
// valid JSON there. The top-level body was never go-openai's, because its
// request type holds temperature as a float32 with omitempty and so drops
// temperature 0. The HTTP exchange and
// the SSE framing are also this package's: go-openai's stream reader
// reports a body that ends without [DONE] exactly like a finished one, so
// a stream cut short would pass as complete.
//
// # The reasoning field
//
// Engines stream chain-of-thought beside the answer, under two names:
// reasoning_content (llama.cpp, SGLang, vLLM before 0.17) and reasoning
// (vLLM 0.17 and later; some versions send both with the same text).
// Both are read; reasoning wins when both are present, so the text is
// never doubled.
//
// # Decoding
//
// A chunk is decoded in one pass by a scanner that reads only the fields
// loom uses (choices' delta, finish_reason, tool calls, usage, an error
// object) and skips the rest, checking it: no reflection, no second
// validation of nested values. That made a chunk about 4x cheaper than
// json.Unmarshal into go-openai's types (BenchmarkParseText).
//
// # Non-streaming turns
//
// A Request with Whole set is sent with stream false and the answer read
// as one chat.completion: its message gives the same deltas, in the same
// order, as its stream would (each tool call whole, in one delta), then
// usage and the finish reason. The first-byte timeout then bounds the
// whole generation, since the engine sends nothing before it is done.
//
// # Stream
//
// Deltas are emitted as chunks arrive: reasoning, text and tool-call
// pieces. A tool call's first piece carries its id (generated when the
// engine sends none) and name, later pieces append arguments; parallel
// calls interleave by their upstream index and are numbered densely in
// order of appearance. Usage (cached tokens from prompt_tokens_details,
// reasoning tokens from completion_tokens_details) and the finish reason
// are emitted at [DONE], usage first. A turn that made tool calls and did
// not hit the length limit finishes as tool_calls whatever the engine
// said, since engines disagree there; a missing finish reason is stop.
//
// # Errors
//
// Connection errors, 429 and 5xx are retried (loom's retry rule,
// internal/httpretry, with go-retryablehttp's bounded exponential
// backoff) only until a response is accepted: once the body is
// being read nothing is retried. Failures are *responses.APIError values: 429
// stays 429; a 400 or 422 (the request is bad for the model: its context
// too long, say) is a 400 whose message carries the engine's reason,
// cleaned of URLs, hosts, credentials and control characters and capped
// at 1 KiB, coded "context_length_exceeded" or "invalid_prompt"; 5xx,
// other 4xx, garbage, an upstream error inside the stream and a stream
// that ends without [DONE] are 502; a timeout (the caller's deadline,
// FirstByteTimeout, a connect timeout) is 504, and a stream that goes
// silent for IdleTimeout once it started is a 504 with Code
// "upstream_idle_timeout". Messages are safe for clients; what the engine
// said is in Err as an *UpstreamError, and every failure the engine
// answered is logged at warn with the endpoint's path, the status and the
// engine's message (capped, credentials removed) or the dial error; a
// request that cannot be rendered is a 400, never sent nor logged.
// Cancelling ctx aborts the HTTP request and closes its connection,
// which is how the engine learns to stop; Stream then returns ctx.Err().
package chat
