package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a server lists beyond what the model is shown (title, output
// schema, annotations) is kept in the definition's MCP details, and the
// read-only hint read from them; a tool with none has no details.
func TestDefinitionKeepsMCPDetails(t *testing.T) {
	schema := map[string]any{"type": "object"}
	d, _ := definition(&mcpsdk.Tool{Name: "look", Description: "Looks.", InputSchema: schema, OutputSchema: schema,
		Annotations: &mcpsdk.ToolAnnotations{Title: "Look", ReadOnlyHint: true}})
	if d.MCP == nil || d.MCP.Title != "Look" || string(d.MCP.OutputSchema) != `{"type":"object"}` ||
		!strings.Contains(string(d.Annotations()), `"readOnlyHint":true`) || !readOnly(d) {
		t.Fatalf("got %+v, details %+v", d, d.MCP)
	}
	d, _ = definition(&mcpsdk.Tool{Name: "write", Title: "Write", InputSchema: schema, Annotations: &mcpsdk.ToolAnnotations{Title: "Other"}})
	if d.MCP == nil || d.MCP.Title != "Write" || readOnly(d) || d.MCP.OutputSchema != nil {
		t.Fatalf("got %+v, details %+v", d, d.MCP)
	}
	d, _ = definition(&mcpsdk.Tool{Name: "plain", InputSchema: schema})
	if d.MCP != nil || d.Annotations() != nil || readOnly(d) {
		t.Fatalf("got %+v, details %+v", d, d.MCP)
	}
	var ann map[string]any
	if d, _ = definition(&mcpsdk.Tool{Name: "x", InputSchema: schema, Annotations: &mcpsdk.ToolAnnotations{}}); json.Unmarshal(d.Annotations(), &ann) != nil {
		t.Fatalf("annotations %s", d.Annotations())
	}
}
