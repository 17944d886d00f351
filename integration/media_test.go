package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomgate/loom/tools/mcp"
)

// testPNG is a small real PNG image.
func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func imageInput(url, text string) []any {
	return []any{map[string]any{"type": "message", "role": "user", "content": []any{
		map[string]any{"type": "input_text", "text": text},
		map[string]any{"type": "input_image", "image_url": url, "detail": "low"},
	}}}
}

// upstreamImageURLs returns the image_url parts of the chat upstream's
// latest request.
func upstreamImageURLs(t *testing.T, h *harness) []string {
	t.Helper()
	reqs := h.Mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream got no request")
	}
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(reqs[len(reqs)-1].Body, &body)
	var urls []string
	for _, m := range body.Messages {
		var parts []struct {
			Type     string `json:"type"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			if p.Type == "image_url" {
				urls = append(urls, p.ImageURL.URL)
			}
		}
	}
	return urls
}

func TestDataURLImageReachesChatUpstream(t *testing.T) {
	h := newHarness(t, nil)
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG(t))
	status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(dataURL, "#say A red pixel.\nWhat is this?")})
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	var resp struct{ ID, Status string }
	json.Unmarshal(b, &resp)
	if resp.Status != "completed" {
		t.Fatalf("status %s: %s", resp.Status, b)
	}
	if got := upstreamImageURLs(t, h); len(got) != 1 || got[0] != dataURL {
		t.Errorf("upstream image parts %.80q, want the data URL", got)
	}
	// Stored and listed like any other content.
	if got := storedImageURL(t, h, resp.ID); got != dataURL {
		t.Errorf("stored input_image %.80q: want it as sent", got)
	}
}

// storedImageURL returns the image_url of the second content part of the
// first input item of response id, as GET .../input_items lists it.
func storedImageURL(t *testing.T, h *harness, id string) string {
	t.Helper()
	res, err := http.Get(h.BaseURL + "/responses/" + id + "/input_items")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var list struct {
		Data []struct {
			Content []struct {
				Type     string `json:"type"`
				ImageURL string `json:"image_url"`
			} `json:"content"`
		} `json:"data"`
	}
	json.Unmarshal(raw, &list)
	if len(list.Data) != 1 || len(list.Data[0].Content) != 2 || list.Data[0].Content[1].Type != "input_image" {
		t.Fatalf("input items %.300s: want one message with an input_image second", raw)
	}
	return list.Data[0].Content[1].ImageURL
}

func TestImageURLGoesThroughTheURLPolicy(t *testing.T) {
	img := testPNG(t)
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(img)
	}))
	defer imgSrv.Close()
	url := imgSrv.URL + "/pixel.png"

	refuse, _ := mcp.NewPolicy(nil)
	h := newHarness(t, &harnessOptions{ImageURLPolicy: refuse})
	status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(url, "#say no")})
	var e struct {
		Error struct{ Param, Message string }
	}
	json.Unmarshal(b, &e)
	if status != http.StatusBadRequest || e.Error.Param != "input[0].content[1].image_url" || !strings.Contains(e.Error.Message, "loopback") {
		t.Errorf("loopback image URL: %d %s, want a 400 naming the image_url", status, b)
	}
	if n := len(h.Mock.Requests()); n != 0 || h.Store.saves.Load() != 0 {
		t.Errorf("a refused request reached the upstream (%d) or the store (%d)", n, h.Store.saves.Load())
	}

	// No policy at all: URLs are not fetched.
	h = newHarness(t, nil)
	status, b = postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(url, "#say no")})
	if status != http.StatusBadRequest || !strings.Contains(string(b), "data URL") {
		t.Errorf("no policy: %d %s, want a 400 asking for a data URL", status, b)
	}

	// Allowed by the operator: fetched, and the upstream gets the bytes.
	allow, _ := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1"})
	h = newHarness(t, &harnessOptions{ImageURLPolicy: allow})
	status, b = postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(url, "#say A pixel.")})
	if status != http.StatusOK {
		t.Fatalf("allowed image URL: %d %s", status, b)
	}
	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)
	if got := upstreamImageURLs(t, h); len(got) != 1 || got[0] != want {
		t.Errorf("upstream image parts %.80q, want the fetched bytes as a data URL", got)
	}
	// The model read the bytes; the stored input keeps the URL as sent.
	var resp struct{ ID string }
	json.Unmarshal(b, &resp)
	if got := storedImageURL(t, h, resp.ID); got != url {
		t.Errorf("stored input_image %.80q, want the URL as sent (%s)", got, url)
	}
}

func TestImageOnHarmonyIs400(t *testing.T) {
	h := upstreams[1].harness(t, nil)
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG(t))
	status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(dataURL, "#say no")})
	var e struct {
		Error struct{ Param, Message string }
	}
	json.Unmarshal(b, &e)
	if status != http.StatusBadRequest || e.Error.Param != "input[0].content[1]" || !strings.Contains(e.Error.Message, "takes no images") {
		t.Errorf("%d %s, want a 400 saying the model takes no images", status, b)
	}
	if n := len(h.Mock.Requests()); n != 0 || h.Store.saves.Load() != 0 {
		t.Errorf("a refused request reached the upstream (%d) or the store (%d)", n, h.Store.saves.Load())
	}
}

func TestInputFile(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		text := "name,count\nwidgets,42\n"
		file := func(data, name string) []any {
			return []any{map[string]any{"type": "message", "role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "#say Read it.\nHow many widgets?"},
				map[string]any{"type": "input_file", "filename": name, "file_data": data},
			}}}
		}
		for _, data := range []string{
			"data:text/csv;base64," + base64.StdEncoding.EncodeToString([]byte(text)),
			base64.StdEncoding.EncodeToString([]byte(text)), // bare base64, typed by the name
		} {
			status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": file(data, "stock.csv")})
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, b)
			}
			if p := lastPrompt(t, h); !strings.Contains(p, "widgets,42") || !strings.Contains(p, "stock.csv") {
				t.Errorf("the prompt lacks the file's text:\n%s", p)
			}
		}
		pdf := "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("%PDF-1.7 binary"))
		status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": file(pdf, "report.pdf")})
		var e struct {
			Error struct{ Param, Message string }
		}
		json.Unmarshal(b, &e)
		if status != http.StatusBadRequest || e.Error.Param != "input[0].content[1].file_data" || !strings.Contains(e.Error.Message, "only text files") {
			t.Errorf("pdf: %d %s, want a clear 400 naming file_data", status, b)
		}
	})
}

// TestImageURLRedirects: an image URL is followed through at most 3
// redirects (each checked by the policy); a fourth is a 400 naming the
// image_url.
func TestImageURLRedirects(t *testing.T) {
	img := testPNG(t)
	var served atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "image/png")
		w.Write(img)
	})
	imgSrv := httptest.NewServer(mux)
	defer imgSrv.Close()
	allow, _ := mcp.NewPolicy(&mcp.PolicyOptions{Allow: "127.0.0.1"})
	h := newHarness(t, &harnessOptions{ImageURLPolicy: allow})

	status, b := postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(imgSrv.URL+"/hop/3", "#say A pixel.")})
	if status != http.StatusOK || served.Load() != 1 {
		t.Fatalf("3 redirects: %d %s (image served %d times), want the image fetched", status, b, served.Load())
	}
	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)
	if got := upstreamImageURLs(t, h); len(got) != 1 || got[0] != want {
		t.Errorf("upstream image parts %.80q, want the fetched bytes as a data URL", got)
	}

	status, b = postPath(t, h, "/responses", map[string]any{"model": "mock-model", "input": imageInput(imgSrv.URL+"/hop/4", "#say no")})
	var e struct {
		Error struct{ Param, Message, Type string }
	}
	json.Unmarshal(b, &e)
	if status != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Param != "input[0].content[1].image_url" || !strings.Contains(e.Error.Message, "more than 3") {
		t.Errorf("4 redirects: %d %s, want a 400 naming the image_url and the redirects", status, b)
	}
	if served.Load() != 1 {
		t.Errorf("the image behind 4 redirects was fetched")
	}
}
