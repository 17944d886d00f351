// Package completions is the model.Backend that speaks harmony, the
// format gpt-oss models are trained on, over an OpenAI-compatible
// completions endpoint (POST {baseURL}/completions). loom renders the
// prompt to token ids itself and parses the model's raw output itself, so
// nothing of gpt-oss is lost in an engine's chat template or tool parser:
// the built-in browser and python namespaces, the analysis channel kept
// through a tool loop, preambles, calls made on the analysis channel,
// exact token usage, and a user who types "<|end|>" getting ordinary text.
//
// # The prompt
//
// Render turns a model.Request into token ids with the harmony package:
//
//   - A system message: identity (Options.ModelIdentity), knowledge
//     cutoff, today's date (Options.Now, in UTC), the reasoning effort
//     (none and minimal become low, xhigh becomes high; unset is medium),
//     the built-in namespaces of Options.BuiltinTools, one namespace per
//     tool server (model.Request.Namespaces: an MCP server's tools,
//     declared next to the built-ins as vLLM declares MCP tool servers,
//     so that two servers' tools of one name do not collide), and the
//     valid channels. Without function tools or server namespaces the
//     channels are analysis and final only (vLLM's rule); with them
//     commentary is added, and with function tools the note that calls
//     go to 'functions'. A placement that cannot be a recipient (a
//     namespace named functions, python, browser, container, assistant
//     or all, one with a '.' or a space, or a recipient two tools would
//     share) is ignored: that tool stays a function.
//   - A developer message, when there is something to put in it:
//     Instructions ("# Instructions"), the function tools (the functions
//     namespace, declared from their JSON Schema in its own key order)
//     unless tool_choice is "none", and a "# Response Formats" section for
//     a json_schema text format (the form of OpenAI's harmony guide; it
//     guides the model, and enforcing it is the engine's guided decoding,
//     passed through Request.Extra).
//   - The history: user messages; system and developer input messages as
//     developer messages with "# Instructions"; assistant messages on the
//     final channel, or commentary for phase "commentary" (a preamble);
//     reasoning items as analysis messages (their text, else their
//     summary; an item with neither is skipped); function_call items as
//     "assistant to=functions.NAME<|channel|>commentary <|constrain|>json"
//     ending in <|call|>; function_call_output items as a tool message
//     from functions.NAME (found by call_id) to the assistant on
//     commentary. Calls and outputs of a namespaced tool use its
//     recipient "NS.tool" instead of functions.NAME, on commentary too.
//     Calls named "python" or "browser.*" that are not declared
//     functions are built-in calls and their outputs: recipient and author
//     are the name itself, on the analysis channel, content type "code".
//   - <|start|>assistant.
//
// Earlier chain of thought follows Options.Analysis, by default harmony's
// server rule: analysis before the last final answer is dropped, analysis
// of a turn still in its tool loop is kept.
//
// # Engine parameters
//
// The body is {"model", "prompt": [ids...], "stream": true,
// "stream_options": {"include_usage": true}, "max_tokens", sampling
// values}, plus per Options.Engine:
//
//   - vLLM (default): "stop_token_ids": [200002, 200012] to stop at
//     <|return|> and <|call|>; "skip_special_tokens": false, because by
//     default the special tokens would vanish from the text and the
//     structure with them; "spaces_between_special_tokens": false, so no
//     blank is put between adjacent special tokens;
//     "include_stop_str_in_output": true, so the <|call|> or <|return|>
//     that stopped generation stays in the text; "return_token_ids": true,
//     so each chunk carries its token ids ("token_ids"), which the parser
//     reads instead of the text.
//   - SGLang: the same, except that its name for keeping the stop token
//     is "no_stop_trim" and it returns no token ids, so the text is
//     parsed. Some SGLang versions declare max_tokens as a plain integer
//     and reject null: set Options.DefaultMaxTokens for them.
//   - llama.cpp: only the common fields. Its /v1/completions accepts a
//     prompt of token ids. It stops on the model's end-of-generation
//     tokens, which for gpt-oss GGUFs include <|return|> and <|call|>, and
//     it writes special tokens into the text only when llama-server runs
//     with --special. Not verified here: whether it keeps the stop token's
//     text, and whether its OpenAI-style chunks can carry token ids; the
//     parser copes without both (the end of the stream closes the last
//     message, and a turn with calls finishes as tool_calls).
//
// max_tokens is always sent, because completions endpoints default to 16:
// the request's MaxOutputTokens, else Options.DefaultMaxTokens, else null
// (vLLM and llama.cpp: up to the context length). Request.Extra is merged
// last and may add or override keys, except model, prompt, stream,
// stream_options and skip_special_tokens.
//
// A Request with Whole set is sent with stream false (and no
// stream_options); the answer, one text_completion with the whole output,
// goes through the same router as one chunk, so it gives the deltas,
// usage and finish reason its stream would have. The first-byte timeout
// then bounds the whole generation.
//
// # The stream
//
// Each chunk's token ids (else its text) go through a harmony.Parser that
// starts inside the assistant header the prompt opened. What the model
// writes is routed per message:
//
//   - analysis, no recipient: DeltaReasoning;
//   - commentary, no recipient: DeltaPreamble;
//   - final (or no channel): DeltaText;
//   - any recipient, on any channel: a DeltaToolCall announced as soon as
//     the header is complete, with a generated call id and the name
//     (the offered name for a namespaced tool's "NS.tool"; NAME for
//     functions.NAME; the whole recipient otherwise, such as
//     "python" or "browser.search", for the tools layer to resolve), then
//     the arguments as deltas. Calls in one turn get increasing ToolIndex;
//   - a message the model writes as another author (an imagined tool
//     result) is dropped.
//
// At [DONE] the end of the stream closes the last message; then usage and
// the finish reason are emitted. The finish reason is length or
// content_filter when the engine says so, else tool_calls when the turn
// called a tool (it stopped at <|call|>), else stop.
//
// Usage: input tokens are the number of rendered prompt ids, exactly (the
// engine's count is not used: it may add a BOS or count differently);
// output tokens are the engine's completion_tokens, or counted here (ids,
// or the text re-encoded per message); reasoning tokens are every token of
// the messages on the analysis and commentary channels, headers included;
// cached tokens come from the engine's prompt_tokens_details.
//
// # Errors
//
// As in model/chat: connection errors, 429 and 5xx are retried
// (internal/httpretry, bounded exponential backoff) only until a response
// is accepted, never once the body is being read. Failures are
// *responses.APIError values: 429 stays 429; a 400 or 422 is a 400 with the
// engine's reason, cleaned, as in model/chat; 5xx, other 4xx, garbage, output the
// parser rejects, an error inside the stream, finish reason abort or
// error, and a stream that ends without [DONE] are 502; a timeout (the
// caller's deadline, FirstByteTimeout, a connect timeout) is 504, a stream
// silent for IdleTimeout a 504 coded "upstream_idle_timeout"; failures are
// logged as in model/chat. A
// request that cannot be rendered is a 400 and is never sent. Cancelling
// ctx closes the connection, which is how the engine learns to stop;
// Stream then returns ctx.Err().
package completions
