package websearch

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkHTMLText reduces a 100 KiB page (paragraphs, links, a script)
// to text: the CPU a browser.open costs loom once the page arrived.
func BenchmarkHTMLText(b *testing.B) {
	var page strings.Builder
	page.WriteString("<html><head><title>T</title><script>var x = 1;</script></head><body>")
	for i := 0; page.Len() < 100<<10; i++ {
		fmt.Fprintf(&page, "<p>Paragraph %d with <a href=\"/p/%d\">a link</a> and some words to read.</p>\n", i, i)
	}
	body := []byte(page.String())
	base, _ := url.Parse("https://example.com/")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, text, _ := htmlText(body, base); text == "" {
			b.Fatal("no text")
		}
	}
}
