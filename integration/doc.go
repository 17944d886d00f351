// Package integration holds loom's end-to-end tests: real clients (the
// openai-go SDK, go-openai's Responses client, the openai npm package run
// with node) talk to loom served in-process over the scripted upstream
// (model/mockllm) and a real SQLite store, all on loopback. Every response
// body and event they produce is validated against the Open Responses
// schema (testdata/openresponses-openapi.json). Golden SSE transcripts live
// in testdata/golden; run the tests with -update to rewrite them.
package integration
