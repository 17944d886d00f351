// Package harmony implements the harmony format of OpenAI's gpt-oss models:
// rendering conversations to the token ids the model reads, and parsing the
// tokens it writes back.
//
// # The format
//
// A conversation is a sequence of messages, each written as
//
//	<|start|>{header}<|message|>{content}{terminator}
//
// where the header names the author and optionally a recipient, a channel
// and a content type:
//
//	<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Paris"}<|call|>
//
// The assistant thinks on the analysis channel, talks to tools or writes
// preambles on commentary, and answers on final. A message addressed to a
// tool ends with <|call|>; the end of the assistant's turn is <|return|>;
// every other message ends with <|end|>. The <|...|> markers are single
// special token ids (see the Token constants), never the text that spells
// them.
//
// # Rendering
//
// Build messages with Message, TextMessage, NewSystemContent,
// DeveloperContent and FunctionsNamespace, then call RenderForCompletion to
// get a prompt ending in "<|start|>assistant". Rendering produces token ids
// directly, because an engine given ids cannot mistake text a user typed
// ("<|end|>") for a special token, and the ids are the exact input token
// count. Each Render function has a Text twin that writes the same thing as
// text with the special tokens spelled out, for logs, tests and engines that
// only accept text.
//
// Tools are declared in TypeScript-like syntax generated from their JSON
// Schema (SchemaToTypeScript). Schemas stay json.RawMessage all the way: the
// declaration lists properties in the order the schema wrote them, so a
// schema is never decoded into a Go map. The built-in browser and python
// tools go in the system message (BrowserNamespace, PythonNamespace);
// function tools go in the developer message.
//
// Earlier turns' chain of thought is normally not shown to the model again.
// RenderOptions.Analysis chooses the rule: DropAnalysisServer (the default,
// vLLM's rule: drop analysis before the last final answer, keep it during an
// unfinished tool loop), DropAnalysisReference (openai-harmony's
// auto_drop_analysis, which the golden vectors use) or KeepAnalysis.
//
// # Parsing
//
// A Parser consumes the model's output one token id at a time (Process), or
// as text for engines that return text with the special tokens written
// literally (ProcessText), and finally ProcessEOS. Between calls it reports
// the current channel, recipient and content type, the content added by the
// call (Delta) and the completed messages (Messages). Bytes of a character
// split across tokens are held back until the character is complete, so
// deltas are always whole UTF-8; invalid bytes become U+FFFD. The parser
// accepts the recipient before or after the channel, and <|constrain|> with
// or without a space before it. Parsing content does not allocate per
// token: Delta aliases an internal buffer that is valid until the next call.
//
// # Exactness and differences from the reference
//
// The package is checked against the golden vectors of openai/harmony
// v0.0.8 (testdata/), in text and in token ids. Where it differs from the
// reference on purpose, the difference only affects streaming:
//
//   - A token id outside the vocabulary becomes U+FFFD at once; the
//     reference holds it (and every token after it) until the end of the
//     message and then writes a single U+FFFD for the lot.
//   - All invalid bytes in a token are replaced at once; the reference
//     replaces one invalid sequence per token and delays the rest.
//   - When the end of a message flushes held-back bytes (as U+FFFD) or
//     recovers content from a malformed header (lenient mode), Delta reports
//     it, so the deltas of a message always add up to its content; the
//     reference reports no delta there.
//
// Completed messages are the same as the reference's in every case the
// vectors cover.
package harmony
