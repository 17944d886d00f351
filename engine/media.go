package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// URLPolicy decides which URLs loom may fetch on a request's behalf, so
// that a request-supplied URL cannot make it a proxy into its own network
// (SSRF). tools/mcp's Policy, which checks MCP server URLs, implements it:
// image URLs go through the same allowlist (--mcp-allow).
type URLPolicy = tools.URLPolicy

// Defaults of the image fetch.
const (
	DefaultMaxImageBytes = 20 << 20
	imageFetchTimeout    = 30 * time.Second
	maxImageRedirects    = 3
)

// imageFetcher fetches input_image URLs through a URLPolicy, into data
// URLs: the upstream engine gets the bytes, never a URL it would fetch
// from its own network without loom's checks.
type imageFetcher struct {
	policy   URLPolicy
	client   *http.Client
	maxBytes int64
}

func newImageFetcher(policy URLPolicy, maxBytes int64) *imageFetcher {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxImageBytes
	}
	f := &imageFetcher{policy: policy, maxBytes: maxBytes}
	f.client = &http.Client{
		Transport: &http.Transport{DialContext: policy.DialContext, ResponseHeaderTimeout: imageFetchTimeout},
		Timeout:   imageFetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			// via holds the requests already sent, the first included:
			// the n-th redirect is followed with len(via) == n.
			if len(via) > maxImageRedirects {
				return fmt.Errorf("it redirected more than %d times", maxImageRedirects)
			}
			_, err := policy.CheckURL(req.Context(), req.URL.String())
			return err
		},
	}
	return f
}

// fetch returns the image at raw as a data URL, or a 400 naming param.
func (f *imageFetcher) fetch(ctx context.Context, raw, param string) (string, error) {
	if _, err := f.policy.CheckURL(ctx, raw); err != nil {
		return "", responses.BadRequest(param, "the image URL is not allowed: %s", tools.Refusal(err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return "", responses.BadRequest(param, "the image URL is not valid")
	}
	req.Header.Set("Accept", "image/*")
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", responses.BadRequest(param, "the image could not be fetched: %s", tools.Refusal(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", responses.BadRequest(param, "fetching the image answered HTTP %d", resp.StatusCode)
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(ctype, "image/") {
		return "", responses.BadRequest(param, "the image URL answered %q, not an image", ctype)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes+1))
	if err != nil {
		return "", responses.BadRequest(param, "the image could not be read")
	}
	if int64(len(body)) > f.maxBytes {
		return "", responses.BadRequest(param, "the image is larger than %d bytes", f.maxBytes)
	}
	return "data:" + ctype + ";base64," + base64.StdEncoding.EncodeToString(body), nil
}

// modelParts returns a message's content as the model reads it: text
// files as text, images checked against what the upstream takes and, for
// URLs, fetched. param names the item.
func (e *Engine) modelParts(ctx context.Context, parts []responses.ContentPart, param string) ([]responses.ContentPart, error) {
	var out []responses.ContentPart
	for j, p := range parts {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case responses.PartInputImage:
			if e.opts.Upstream.TextOnly {
				return nil, responses.BadRequest(pp, "this model takes no images: the upstream is a text-only model (gpt-oss over harmony)")
			}
			if !strings.HasPrefix(p.MediaFields().ImageURL, "data:") {
				if e.images == nil {
					return nil, responses.BadRequest(pp+".image_url", "this server does not fetch image URLs: send the image as a data URL")
				}
				data, err := e.images.fetch(ctx, p.MediaFields().ImageURL, pp+".image_url")
				if err != nil {
					return nil, err
				}
				// p is a copy whose Media is the stored part's: the
				// model's part gets Media of its own.
				m := p.MediaFields()
				m.ImageURL = data
				p.Media = &m
			}
		case responses.PartInputFile:
			text, err := fileText(p)
			if err != nil {
				return nil, responses.BadRequest(pp+".file_data", "%v", err)
			}
			name := p.MediaFields().Filename
			if name == "" {
				name = "file"
			}
			p = responses.ContentPart{Type: responses.PartInputText, Text: "File " + name + ":\n\n" + text}
		}
		out = append(out, p)
	}
	return out, nil
}

// textTypes are media types read as text besides text/*.
var textTypes = map[string]bool{
	"application/json": true, "application/xml": true, "application/yaml": true, "application/x-yaml": true,
	"application/toml": true, "application/javascript": true, "application/x-sh": true, "application/sql": true,
	"application/csv": true, "application/x-ndjson": true,
}

// textExtensions are file name extensions read as text when the data has
// no media type.
var textExtensions = map[string]bool{
	".txt": true, ".md": true, ".csv": true, ".tsv": true, ".json": true, ".jsonl": true, ".xml": true, ".yaml": true,
	".yml": true, ".toml": true, ".ini": true, ".log": true, ".html": true, ".htm": true, ".css": true, ".js": true,
	".ts": true, ".py": true, ".go": true, ".rs": true, ".java": true, ".c": true, ".h": true, ".cpp": true, ".sh": true,
	".sql": true, ".rb": true, ".php": true, ".diff": true, ".patch": true,
}

// fileText decodes an input_file's file_data (a data URL, or bare base64
// with the type told by the file name) and returns it when it is text.
// Other files are refused: loom has no document parser, and the model
// reads text only.
func fileText(p responses.ContentPart) (string, error) {
	data, ctype := p.MediaFields().FileData, ""
	if rest, ok := strings.CutPrefix(data, "data:"); ok {
		meta, payload, ok := strings.Cut(rest, ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return "", errors.New("file_data must be a base64 data URL (data:<type>;base64,<data>) or base64")
		}
		ctype, _, _ = mime.ParseMediaType(strings.TrimSuffix(meta, ";base64"))
		data = payload
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return "", errors.New("file_data is not valid base64")
	}
	isText := strings.HasPrefix(ctype, "text/") || textTypes[ctype]
	if ctype == "" || ctype == "application/octet-stream" {
		isText = textExtensions[strings.ToLower(path.Ext(p.MediaFields().Filename))]
		ctype = "unknown type"
	}
	if !isText {
		return "", fmt.Errorf("only text files can be read, and %s (%s) is not one; send its text as input_text", nameOr(p.MediaFields().Filename), ctype)
	}
	if !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0 {
		return "", fmt.Errorf("%s is not UTF-8 text", nameOr(p.MediaFields().Filename))
	}
	return string(raw), nil
}

func nameOr(name string) string {
	if name == "" {
		return "the file"
	}
	return name
}
