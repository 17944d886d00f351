// Package model defines the upstream Backend that the Engine drives: one
// model turn in Responses terms (Request) streamed back as Deltas.
//
// Subpackages implement it over the wire formats engines speak:
// model/chat over an OpenAI chat-completions endpoint (any engine), and
// model/completions over a completions endpoint with the prompt rendered as
// harmony token ids (gpt-oss at full fidelity). Both send their requests
// through model/internal/upstream, which owns the HTTP side they share
// (retries, timeouts, SSE framing, error mapping), so a fix there holds for
// every engine; each keeps only its wire format. model/mockllm is a scripted
// upstream that speaks both formats, for tests, the demo and benchmarks.
//
// Beyond streaming, a backend declares Capabilities (text only, how it
// counts input tokens, whether an engine is ready) from its Capabilities
// method; the engine takes them in its options rather than probing the
// backend's type. A backend may serve several engines (NewFleet in each
// backend): a Request's Route places its turn on the engine that holds
// its session's prefix, and an EngineObserver sees each engine's load and
// health.
package model
