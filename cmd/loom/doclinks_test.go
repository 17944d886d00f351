package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks checks the manual's relative links: every link of
// README.md and docs/*.md names a file of the repository and, with a
// #fragment, a heading of that file; and the README's map names every
// page of docs/.
func TestDocLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	readme := filepath.Join(root, "README.md")
	anchors := make(map[string]map[string]bool)
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	linked := make(map[string]bool)
	for _, file := range append([]string{readme}, pages...) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range markdownLinks(string(b)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", file, link, err)
					continue
				}
				if file == readme {
					linked[filepath.Clean(path)] = true
				}
			}
			if frag != "" && !anchorsOf(path)[frag] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", file, link, path)
			}
		}
	}
	for _, p := range pages {
		if !linked[filepath.Clean(p)] {
			t.Errorf("README.md does not link %s", p)
		}
	}
}

// TestHeadingAnchors pins the anchor rule TestDocLinks relies on: GitHub's
// (lower case, punctuation but - and _ dropped, spaces as -, a repeated
// heading numbered), for headings outside code blocks.
func TestHeadingAnchors(t *testing.T) {
	got := headingAnchors("# Tools\n## Function tools and `tool_choice`\n```\n# not a heading\n```\n### Local tools: Python and shell\n## Tools\n")
	for _, want := range []string{"tools", "function-tools-and-tool_choice", "local-tools-python-and-shell", "tools-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block was taken for a heading")
	}
	links := markdownLinks("see [a](a.md#x) and [b](b.md)\n```\n[c](c.md)\n```\n")
	if strings.Join(links, " ") != "a.md#x b.md" {
		t.Errorf("links %q", links)
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks is the targets of the [text](target) links of a markdown
// text, outside fenced code blocks.
func markdownLinks(doc string) []string {
	var out []string
	for _, line := range proseLines(doc) {
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors is the set of anchors GitHub gives the headings of a
// markdown text.
func headingAnchors(doc string) map[string]bool {
	out := make(map[string]bool)
	seen := make(map[string]int)
	for _, line := range proseLines(doc) {
		title, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		title = strings.TrimLeft(title, "#")
		if !strings.HasPrefix(title, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// proseLines is the lines of a markdown text outside fenced code blocks.
func proseLines(doc string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}
