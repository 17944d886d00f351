// Package websearch is loom's web search tool: the Responses web_search
// tool (and web_search_preview, with their dated aliases) and gpt-oss's
// built-in browser (browser.search, browser.open, browser.find), both
// run in loom over a search Backend an operator configures and a Fetcher
// that opens pages under an SSRF policy.
//
// The Backend is a small interface; SearXNG implements it over SearXNG's
// JSON API (GET URL?q=QUERY&format=json, results[].title/url/content),
// which is what self-hosting teams run. Any other engine fits behind the
// same interface.
//
// The Fetcher refuses loopback, private, link-local and other non-public
// addresses unless its Policy allows them; the check is made on the
// address actually dialled, so a redirect or a DNS answer that points
// inside is refused as well. Bodies are capped in size and time, and HTML
// is reduced to text with its links numbered, in the citation form the
// model was trained on (【id†text】).
//
// With no Backend the tool is still offered (Codex always sends
// web_search): every call fails with a message to the model that web
// search is not configured on this server, and the response goes on.
package websearch
