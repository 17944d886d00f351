// Package mockllm is a scripted upstream inference engine. It speaks the
// OpenAI chat-completions wire format the way vLLM, SGLang, llama.cpp and
// Ollama do, and a completions endpoint that answers harmony token ids the
// way vLLM serves gpt-oss, so loom's tests, its demo and its benchmarks can
// run where no model can. The wire formats are written here from the
// standard library, as an independent check of the clients loom uses; only
// the harmony mode borrows loom's harmony package, for the o200k tokenizer
// and to decode the prompt it is given.
//
// # Endpoints
//
//   - POST /v1/chat/completions: JSON (stream false) and SSE (stream true).
//   - POST /v1/completions: harmony mode (see below), JSON and SSE.
//   - GET /v1/models: the names in Options.Models.
//   - POST /tokenize: vLLM's tokenize endpoint, chat form; the count is
//     the prompt_tokens a chat completion of the same messages reports.
//
// Anything else is a 404 with an OpenAI error body. Every request to a
// completion endpoint is recorded (Server.Requests) and counted
// (Server.Stats); WaitStarted, WaitCancelled and WaitDone let a test wait
// for those counters instead of sleeping.
//
// # Scripts
//
// The answer is scripted by the text of the last user message (string
// content, or its "text" parts joined by newlines). A line whose first
// non-blank character is '#' followed by a letter is a directive; every
// other line is ignored, so a script can sit inside ordinary prose. "# A
// heading" and "#1" are not directives. An unknown directive, or a bad
// argument, is answered with a 400 naming the line, so a typo fails loudly.
//
//	#say <text>          answer <text>; repeat for more lines (joined by "\n")
//	#tokens <n>          answer "w1 w2 ... wn" (not together with #say)
//	#reason <text>       reasoning, streamed before the answer; repeatable
//	#call <name> [args]  call tool <name> with arguments args, kept verbatim
//	                     (default "{}"), so malformed JSON can be scripted;
//	                     repeat for parallel calls
//	#callid <id> <name> [args]
//	                     the same with an explicit call id
//	#finish <reason>     override finish_reason (e.g. content_filter)
//	#cached <n>          report n cached prompt tokens
//	#delay <duration>    wait before answering (replaces FirstByteLatency)
//	#latency <duration>  wait between chunks (replaces Latency)
//	#fail <status> [msg] answer HTTP <status> (400-599) with an OpenAI error
//	                     body; msg replaces the default message
//	#flaky <n> <status>  fail the first n requests having this exact body
//	                     with <status>, then answer normally (for retries)
//	#cut <n>             after n stream chunks, drop the connection with no
//	                     [DONE]; the client reads an unexpected EOF
//	#stall [n]           stop after n stream chunks (default 0: before any
//	                     byte) until the client goes away or Server.Close
//	#garbage             answer 200 with a body that is not JSON (in a
//	                     stream: one "data: this is not json" event)
//	#then                end this turn's directives; the next ones script
//	                     the following model turn
//
// Harmony mode only (in chat mode #preamble is ignored and the calls below
// are ordinary tool calls with the given name):
//
//	#preamble <text>     a commentary message before the calls or answer;
//	                     repeatable
//	#callon <channel> <name> [args]
//	                     call function <name> on the analysis or
//	                     commentary channel
//	#builtin python <code>
//	#builtin browser.<tool> <json>
//	                     call a built-in tool (recipient "python",
//	                     "browser.search", ...) on the analysis channel
//	#callns <namespace>.<tool> [args]
//	                     call a tool of a declared namespace (an MCP
//	                     server's, recipient "<namespace>.<tool>", where
//	                     #call would write "functions.<name>") on the
//	                     commentary channel with content type
//	                     <|constrain|>json
//
// Without a #say, #tokens or #call the answer is the default text: when
// the conversation ends with tool messages, one line "tool said: <content>"
// per result, so a test sees the round trip; otherwise DefaultAnswer.
//
// # Turns
//
// An agent loop sends the same user message several times: first alone,
// then followed by the model's tool calls and their results. The script
// section used is the number of model turns since the last user message,
// counting a run of consecutive assistant messages as one turn. So
//
//	#call get_weather {"city": "Paris"}
//	#then
//	#say It is sunny in Paris.
//
// calls the tool, then answers once the result comes back. When the
// sections run out the default text is answered, which ends any loop.
//
// # Tool calls
//
// Call ids are call_1, call_2, ... numbered after the tool calls already in
// the conversation, so they stay unique across turns. The mock does not
// check that a called tool was offered, or tool_choice: real models get
// that wrong too, and the script is the test's explicit intent.
//
// # Streaming (chat mode)
//
// A stream is, in order: a chunk with delta {"role":"assistant",
// "content":""}; reasoning pieces (in the field named by
// Options.ReasoningField); content pieces; for each call a chunk with its
// index, id, type "function", name and empty arguments, then argument
// pieces with only the index; a chunk with an empty delta and the
// finish_reason; if stream_options.include_usage, a chunk with empty
// choices and usage; then "data: [DONE]". Pieces are Options.ChunkSize
// runes. #cut and #stall count every data line except [DONE]. In JSON mode
// #cut drops the connection and #stall stalls before any answer.
//
// # Tokens
//
// In chat mode there is no tokenizer: one token is one whitespace-separated word.
// prompt_tokens counts the words of every message (text, reasoning, tool
// call names and arguments), raised to at least #cached. completion_tokens
// counts the reasoning and answer words plus, per tool call, one for the
// name and the words of its arguments; reasoning_tokens is the reasoning
// part. max_completion_tokens (or else max_tokens) cuts the output in
// generation order (reasoning, answer, calls) and sets finish_reason
// "length".
//
// # Prefix cache
//
// With Options.PrefixCache the mock simulates an engine's prefix cache, as
// a benchmark of where conversations land needs: prompts are cut into
// 16-token blocks known by their prefix chain, kept least recently used
// first up to a capacity (a request's cache_salt mixed into its first
// block, as vLLM does), and usage reports the prompt tokens found in it
// as prompt_tokens_details.cached_tokens (as vLLM does; the larger of it
// and #cached). Each token not found delays the first byte by
// PrefillPerToken. On the chat endpoint the tokens are then the o200k
// tokens of the body's messages and tools, and prompt_tokens counts them
// (see PrefixCacheOptions); Server.CacheStats has the counters.
//
// # Cancellation
//
// A request whose context ends before its answer is complete (during a
// delay, a stall, a pause between chunks, or a failed write) counts as
// Cancelled. With no latency a short stream may be fully written before
// the server notices the client left, so tests of cancellation use #stall
// or #latency.
//
// # Harmony mode
//
// POST /v1/completions takes "prompt" as one array of harmony token ids
// (or, for convenience, one string, encoded with its special tokens as an
// engine would). The ids are decoded and parsed into harmony messages; the
// script is the text of the last user message, and the turn is counted as
// in chat mode (runs of assistant messages since it, so a tool message
// ends a turn). Request.Completion records the body with PromptIDs,
// PromptText and PromptMessages, so a test can assert exactly what the
// model saw: that analysis was kept or dropped, that a user's literal
// "<|end|>" arrived as ordinary text.
//
// The answer is written as gpt-oss writes it, continuing the
// "<|start|>assistant" the prompt ends with: the #reason lines on the
// analysis channel; each #preamble on commentary; then either the calls,
// each "assistant to=functions.NAME<|channel|>commentary
// <|constrain|>json<|message|>ARGS<|call|>" (on analysis for #callon
// analysis; "to=NS.tool" for #callns; "to=python" or "to=browser.*" with
// content type "code" on analysis for #builtin), or the answer on the final channel ending in
// <|return|>. The first message puts its recipient after the channel, as
// the model does when its header starts in the prompt. A #say in a turn
// with calls becomes one more preamble (a harmony turn that calls tools has
// no final message). A real engine stops at the first <|call|>; the mock
// writes every scripted call so parallel-call scripts work on both
// endpoints.
//
// The stream has one token per chunk, like vLLM: "text" is the token's
// text, with a character split across tokens held back until complete;
// special tokens are written only with "skip_special_tokens": false, and
// the final stop token only with "include_stop_str_in_output" (or SGLang's
// "no_stop_trim"), as the engines do, so a client that forgets them sees
// what it would see in production. "token_ids" is added with
// "return_token_ids": true. The last token's chunk has finish_reason
// "stop" and stop_reason the stop token id (or "length" when max_tokens
// cut the output); with stream_options.include_usage a usage chunk
// follows: prompt_tokens is the number of prompt ids, completion_tokens
// the number of ids written, prompt_tokens_details.cached_tokens is
// #cached. #tokens, #fail, #flaky, #cut, #stall, #garbage, #delay and
// #latency work as in chat mode, counting these chunks.
//
// Options default to no latency at all, for benchmarks.
package mockllm
