package websearch

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlText reduces an HTML page to its title, its text and its links: the
// text keeps block structure as lines, drops scripts, styles and other
// non-text, and writes each link as 【n†text】, n indexing links (resolved
// against base).
func htmlText(body []byte, base *url.URL) (title, text string, links []string) {
	z := html.NewTokenizer(bytes.NewReader(body))
	r := &reducer{base: base}
	for {
		switch tt := z.Next(); tt {
		case html.ErrorToken:
			return strings.TrimSpace(r.title), tidy(r.b.String()), r.links
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			href := ""
			if hasAttr {
				href = attr(z, "href")
			}
			r.start(atom.Lookup(name), tt == html.StartTagToken, href)
		case html.EndTagToken:
			name, _ := z.TagName()
			r.end(atom.Lookup(name))
		case html.TextToken:
			r.text(string(z.Text()))
		}
	}
}

// reducer follows an HTML page's tokens and writes its text.
type reducer struct {
	base    *url.URL
	b       strings.Builder
	title   string
	links   []string
	skip    int // depth inside elements whose text is not page text
	pre     int // depth inside <pre>, where line breaks are the text's
	inTitle bool
	link    *strings.Builder // the text of the open link, if any
	linkURL string
}

func (r *reducer) start(a atom.Atom, opens bool, href string) {
	switch {
	case hidden[a]:
		if opens {
			r.skip++
		}
	case a == atom.Title:
		r.inTitle = opens
	case a == atom.A && r.skip == 0 && href != "":
		if u, err := r.base.Parse(href); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			r.link, r.linkURL = &strings.Builder{}, u.String()
		}
	case a == atom.Br:
		r.b.WriteByte('\n')
	case block[a]:
		if a == atom.Pre && opens {
			r.pre++
		}
		r.newline()
	}
}

func (r *reducer) end(a atom.Atom) {
	switch {
	case hidden[a]:
		r.skip = max(r.skip-1, 0)
	case a == atom.Title:
		r.inTitle = false
	case a == atom.A && r.link != nil:
		words := strings.Join(strings.Fields(r.link.String()), " ")
		r.b.WriteString("【" + strconv.Itoa(len(r.links)) + "†" + words + "】")
		r.links = append(r.links, r.linkURL)
		r.link = nil
	case block[a]:
		if a == atom.Pre {
			r.pre = max(r.pre-1, 0)
		}
		r.newline()
	}
}

func (r *reducer) text(t string) {
	if r.pre == 0 {
		// Outside <pre> a line break in the source is a blank.
		t = lineBreaks.Replace(t)
	}
	switch {
	case r.inTitle:
		r.title += t
	case r.skip > 0:
	case r.link != nil:
		r.link.WriteString(t)
	default:
		r.b.WriteString(t)
	}
}

// lineBreaks turns the line breaks of source text into blanks.
var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// newline ends the current line, if it has anything.
func (r *reducer) newline() {
	if s := r.b.String(); s != "" && !strings.HasSuffix(s, "\n") {
		r.b.WriteByte('\n')
	}
}

func attr(z *html.Tokenizer, key string) string {
	for {
		k, v, more := z.TagAttr()
		if string(k) == key {
			return string(v)
		}
		if !more {
			return ""
		}
	}
}

// tidy collapses runs of blanks within lines and drops empty lines.
func tidy(s string) string {
	var out []string
	for line := range strings.Lines(s) {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return strings.Join(out, "\n")
}

// hidden are elements whose content is not the page's text.
var hidden = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Iframe: true, atom.Object: true,
}

// block are elements that start a new line.
var block = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Li: true, atom.Ul: true, atom.Ol: true, atom.Tr: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Section: true, atom.Article: true, atom.Header: true, atom.Footer: true, atom.Nav: true,
	atom.Table: true, atom.Pre: true, atom.Blockquote: true, atom.Hr: true, atom.Dt: true, atom.Dd: true,
	atom.Main: true, atom.Aside: true, atom.Form: true,
}
