// Package toolsearch runs the tool_search tool in loom: a request's tools
// marked defer_loading (functions and MCP servers) stay out of the prompt,
// the model is offered one search function instead, and its searches are
// answered from the deferred definitions, so that a request can carry
// hundreds of tools while the prompt carries a handful. The engine offers
// the tools a search found from the model's next turn on
// (tools.KindToolSearch reports the search as tool_search_call and
// tool_search_output items).
//
// A tool_search with execution "client" is not served here: the call goes
// to the client, which answers with the tools it found.
package toolsearch
