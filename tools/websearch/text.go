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
	var b strings.Builder
	skip := 0 // depth inside elements whose text is not page text
	inTitle := false
	pre := 0 // depth inside <pre>, where line breaks are the text's
	var link *strings.Builder
	linkURL := ""
	newline := func() {
		s := b.String()
		if s != "" && !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return strings.TrimSpace(title), tidy(b.String()), links
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			switch {
			case hidden[a]:
				if tt == html.StartTagToken {
					skip++
				}
			case a == atom.Title:
				inTitle = tt == html.StartTagToken
			case a == atom.A && skip == 0 && hasAttr:
				href := attr(z, "href")
				if u, err := base.Parse(href); err == nil && href != "" && (u.Scheme == "http" || u.Scheme == "https") {
					link, linkURL = &strings.Builder{}, u.String()
				}
			case a == atom.Br:
				b.WriteByte('\n')
			case block[a]:
				if a == atom.Pre && tt == html.StartTagToken {
					pre++
				}
				newline()
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			switch {
			case hidden[a]:
				if skip > 0 {
					skip--
				}
			case a == atom.Title:
				inTitle = false
			case a == atom.A && link != nil:
				words := strings.Join(strings.Fields(link.String()), " ")
				b.WriteString("【" + strconv.Itoa(len(links)) + "†" + words + "】")
				links = append(links, linkURL)
				link = nil
			case block[a]:
				if a == atom.Pre && pre > 0 {
					pre--
				}
				newline()
			}
		case html.TextToken:
			t := string(z.Text())
			if pre == 0 {
				// Outside <pre> a line break in the source is a blank.
				t = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(t)
			}
			switch {
			case inTitle:
				title += t
			case skip > 0:
			case link != nil:
				link.WriteString(t)
			default:
				b.WriteString(t)
			}
		}
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
