package toolsearch

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkSearch is one search over 200 deferred function tools: what a
// tool_search call costs loom, besides the model turn it saves.
func BenchmarkSearch(b *testing.B) {
	var tools strings.Builder
	tools.WriteString(`{"type":"tool_search"}`)
	for i := range 200 {
		fmt.Fprintf(&tools, `,{"type":"function","name":"tool_%03d","description":"Manages inventory record %d of the warehouse.","defer_loading":true}`, i, i)
	}
	s := server(b, tools.String())
	b.ReportAllocs()
	for b.Loop() {
		if len(s.Search("warehouse inventory tool_150")) == 0 {
			b.Fatal("nothing found")
		}
	}
}
