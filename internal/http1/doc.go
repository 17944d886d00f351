// Package http1 is an HTTP/1.1 client transport for one plain-HTTP
// origin: loom's upstream engine, which is usually next to it (vLLM,
// SGLang, llama.cpp, Ollama on http://host:port/v1).
//
// It does what net/http's Transport does for such a request with less
// per request and per open stream. Each round trip runs on the caller's
// goroutine: the request is written and the response read by the
// goroutine that called RoundTrip, and the response body is read from
// the connection by whoever reads it. net/http's Transport runs two
// goroutines per connection (a read loop and a write loop) and hands
// each request and response between them and the caller: two goroutine
// wake-ups per request, and two more stacks, a write buffer and the
// transport's bookkeeping held for as long as a stream is open
// (BENCHMARKS.md, "The upstream transport").
//
// What it leaves out is what such an upstream does not need: TLS,
// proxies, HTTP/2, compression, 1xx handling beyond skipping 100
// Continue, and request bodies of unknown length (a body is read whole
// first). The upstream client uses it only for http:// URLs that no
// proxy setting of the environment applies to; anything else goes
// through net/http.
//
// Connections are kept per Transport (one origin), most recently used
// first, up to MaxIdleConns, and closed after IdleConnTimeout unused.
// Nothing reads a kept connection while it waits (net/http's read loop
// does, and so drops one the server closed at once); instead, one unused
// for more than half a second is looked at before it is reused (a peek
// that does not wait, on unix), as engines close idle connections after
// a few seconds. A kept connection the server closed all the same (just
// then, or where the look cannot be made) is found out when the request
// sent on it gets nothing back; that request is then sent once more on a
// new connection, as net/http does (a body of up to 64 KB is sent from
// the copy behind the head, a larger one read again from GetBody).
//
// It reports GotConn and WroteRequest to a request's httptrace.ClientTrace
// (every attempt that got a connection reports WroteRequest once, before
// RoundTrip returns), so a caller lending the body's buffer knows when it
// is free again; no other hook is called.
package http1
