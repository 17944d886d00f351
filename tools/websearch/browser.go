package websearch

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// A page is what the browser shows the model: a search's results, an
// opened page or the matches of a find, as numbered lines. Its cursor is
// its index in the session's pages; the model cites lines of it as
// 【cursor†Lstart-Lend】 and opens its links by number.
type page struct {
	title string
	url   string
	lines []string
	links []string
	// snippets maps a search page's link to the engine's snippet, shown
	// when live pages may not be opened.
	snippets map[int]Result
}

// DefaultViewLines is how many lines one view of a page shows.
const DefaultViewLines = 60

// view renders lines [loc, loc+n) of the page at cursor, headed as gpt-oss
// reads browser output: "[cursor] title (url)" and the lines in view.
func (p *page) view(cursor, loc, n int) string {
	if n <= 0 {
		n = DefaultViewLines
	}
	if loc < 0 || loc >= len(p.lines) {
		loc = 0
	}
	end := min(loc+n, len(p.lines))
	var b strings.Builder
	fmt.Fprintf(&b, "[%d] %s", cursor, p.title)
	if p.url != "" {
		fmt.Fprintf(&b, " (%s)", p.url)
	}
	last := max(len(p.lines)-1, 0)
	fmt.Fprintf(&b, "\n**viewing lines [%d - %d] of %d**\n\n", loc, max(end-1, loc), last)
	for i := loc; i < end; i++ {
		fmt.Fprintf(&b, "L%d: %s\n", i, p.lines[i])
	}
	return b.String()
}

// searchPage lays out a search's results, each as its link and snippet.
func searchPage(query string, results []Result) *page {
	p := &page{title: "Search results for `" + query + "`", snippets: map[int]Result{}}
	for i, r := range results {
		p.lines = append(p.lines, "# 【"+strconv.Itoa(i)+"†"+oneLine(r.Title)+"†"+domain(r.URL)+"】")
		if r.Content != "" {
			p.lines = append(p.lines, strings.Split(tidy(r.Content), "\n")...)
		}
		p.links = append(p.links, r.URL)
		p.snippets[i] = r
	}
	if len(results) == 0 {
		p.lines = []string{"No results."}
	}
	return p
}

// fetchedPage lays out a fetched page's text.
func fetchedPage(f *Page) *page {
	p := &page{title: f.Title, url: f.URL, links: f.Links}
	if f.Text != "" {
		p.lines = strings.Split(f.Text, "\n")
	}
	if f.Truncated {
		p.lines = append(p.lines, "(the page is cut here: it is longer than this server reads)")
	}
	if len(p.lines) == 0 {
		p.lines = []string{"(the page has no text)"}
	}
	return p
}

// snippetPage shows a search result without opening it.
func snippetPage(r Result) *page {
	p := &page{title: r.Title, url: r.URL, lines: strings.Split(tidy(r.Content), "\n")}
	p.lines = append(p.lines, "(only the search engine's snippet: this request does not open live pages)")
	return p
}

// findPage lists the lines of p holding pattern (case-insensitively).
func findPage(p *page, cursor int, pattern string) *page {
	f := &page{title: "Find results for text: `" + pattern + "` in `" + p.title + "`", url: p.url}
	needle := strings.ToLower(pattern)
	for i, line := range p.lines {
		if !strings.Contains(strings.ToLower(line), needle) {
			continue
		}
		f.lines = append(f.lines, "# 【"+strconv.Itoa(len(f.links))+"†match at L"+strconv.Itoa(i)+"】", line)
		f.links = append(f.links, p.url)
	}
	if len(f.lines) == 0 {
		f.lines = []string{fmt.Sprintf("No `find` results for pattern: `%s` in page [%d]", pattern, cursor)}
	}
	return f
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func domain(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Hostname()
}
