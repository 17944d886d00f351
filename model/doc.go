// Package model defines the upstream Backend that the Engine drives: one
// model turn in Responses terms (Request) streamed back as Deltas.
//
// Subpackages implement it: model/chat over an OpenAI chat-completions
// endpoint, and model/mockllm is a scripted upstream that speaks those wire
// formats for tests, the demo and benchmarks.
package model
