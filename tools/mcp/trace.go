package mcp

import (
	"context"
	"reflect"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/telemetry"
)

// traceMeta is SDK sending middleware that puts the request's W3C trace
// context into every outgoing request's params._meta under the keys
// SEP-414 reserves ("traceparent", "tracestate"): an HTTP header covers
// one HTTP request, _meta covers the MCP request whatever the transport.
// The traceparent header itself is set by authTransport.
func traceMeta(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		fields := telemetry.Fields(ctx)
		if p := req.GetParams(); fields != nil && p != nil && !reflect.ValueOf(p).IsNil() {
			m := p.GetMeta()
			if m == nil {
				m = make(map[string]any, len(fields))
			}
			for k, v := range fields {
				m[k] = v
			}
			p.SetMeta(m)
		}
		return next(ctx, method, req)
	}
}
