package responses

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// mixedToolsBody is a request whose tools are of every form the decoder
// takes: function tools in the echo's form and not, null and missing
// fields, and tools of other types kept raw.
func mixedToolsBody(model string) string {
	return `{"model":"` + model + `","input":"hi","tools":[
		{"type":"function","name":"lookup","description":"Looks a city up.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"the city \u00e9"}},"required":["city"]},"strict":true},
		{"name":"plain","type":"function","parameters":{"type":"object"}},
		{"type":"function","name":"nulls","description":null,"parameters":null,"strict":null},
		{"type":"web_search"},
		{"type":"mcp","server_label":"docs","server_url":"https://mcp.example.com/mcp","require_approval":"never"},
		{"type":"custom","name":"patch","description":"Applies a patch."}
	],"temperature":0.5}`
}

// decodeWith decodes body through cache as scope, failing the test on an
// error.
func decodeWith(t *testing.T, cache *ToolCache, scope, body string) *Request {
	t.Helper()
	req, err := DecodeRequestWith([]byte(body), DecodeOptions{Tools: cache, Scope: scope})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return req
}

// cachedLists returns how many lists c holds.
func cachedLists(c *ToolCache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func TestToolCacheGivesWhatTheDecodeGives(t *testing.T) {
	for name, body := range map[string]string{
		"100 function tools": string(toolsBody(100)),
		"mixed":              mixedToolsBody("m"),
	} {
		t.Run(name, func(t *testing.T) {
			want, err := DecodeRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			cache := NewToolCache(1 << 20)
			first := decodeWith(t, cache, "", body)
			if n := cachedLists(cache); n != 1 {
				t.Fatalf("the cache holds %d lists after the first request, want 1", n)
			}
			second := decodeWith(t, cache, "", body)
			for i, got := range []*Request{first, second} {
				if !reflect.DeepEqual(got, want) {
					t.Errorf("request %d through the cache differs from the decode without it:\n got %+v\nwant %+v", i+1, got.Tools, want.Tools)
				}
			}
			if err := second.Validate(nil); err != nil && !strings.Contains(err.Error(), "mcp") && !strings.Contains(err.Error(), "web_search") && !strings.Contains(err.Error(), "custom") {
				t.Errorf("validate: %v", err)
			}
		})
	}
}

func TestToolCacheHitSkipsTheWalk(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewToolCache(1 << 20)
	decodeWith(t, cache, "", body)
	// What the second request gets is the kept list's: renamed here, as
	// nothing else may, to see where it came from.
	cache.mu.Lock()
	cache.order.Front().Value.(*cachedTools).tools[0].Name = "from_the_cache"
	cache.mu.Unlock()
	if got := decodeWith(t, cache, "", body).Tools[0].Name; got != "from_the_cache" {
		t.Fatalf("second request's first tool is %q: the list was decoded again", got)
	}
	// Another body with the same tools, other fields around them.
	other := strings.Replace(body, `"input":"#say ok"`, `"input":"other","temperature":1`, 1)
	if got := decodeWith(t, cache, "", other).Tools[0].Name; got != "from_the_cache" {
		t.Fatalf("a request with the same tools elsewhere in its body: first tool %q", got)
	}
}

func TestToolCacheKeepsScopesApart(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewToolCache(1 << 20)
	decodeWith(t, cache, "tenant-a", body)
	cache.mu.Lock()
	cache.order.Front().Value.(*cachedTools).tools[0].Name = "tenant_a_copy"
	cache.mu.Unlock()
	if got := decodeWith(t, cache, "tenant-b", body).Tools[0].Name; got != "tool_0" {
		t.Fatalf("tenant-b got %q: another tenant's list", got)
	}
	if n := cachedLists(cache); n != 2 {
		t.Fatalf("the cache holds %d lists, want one per tenant", n)
	}
	if got := decodeWith(t, cache, "tenant-a", body).Tools[0].Name; got != "tenant_a_copy" {
		t.Fatalf("tenant-a got %q, not its kept list", got)
	}
}

func TestToolCacheComparesTheWholeList(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewToolCache(1 << 20)
	decodeWith(t, cache, "", body)
	// The same first bytes, another last tool.
	changed := strings.Replace(body, `"name":"tool_19"`, `"name":"tool_xx"`, 1)
	if changed == body {
		t.Fatal("the body has no tool_19")
	}
	want, err := DecodeRequest([]byte(changed))
	if err != nil {
		t.Fatal(err)
	}
	got := decodeWith(t, cache, "", changed)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a list that differs after its first bytes: last tool %q, want %q", got.Tools[19].Name, want.Tools[19].Name)
	}
	// The newer list took the older one's place.
	if n := cachedLists(cache); n != 1 {
		t.Fatalf("the cache holds %d lists, want 1", n)
	}
	if got := decodeWith(t, cache, "", body).Tools[19].Name; got != "tool_19" {
		t.Fatalf("the first list again: last tool %q", got)
	}
}

func TestToolCacheRefusedRequestsKeepNothing(t *testing.T) {
	tools := string(toolsBody(20))
	for name, body := range map[string]string{
		"a bad field after the tools":    strings.TrimSuffix(tools, "}") + `,"temperature":"hot"}`,
		"text after the body":            tools + `x`,
		"a bad tool after good ones":     strings.Replace(tools, `]}`, `,{"type":"function","name":"bad","parameters":{"type":}}]}`, 1),
		"too many input items (a limit)": strings.Replace(tools, `"input":"#say ok"`, `"input":[`+strings.Repeat(`{"role":"user","content":"x"},`, MaxInputItems)+`{"role":"user","content":"x"}]`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			cache := NewToolCache(1 << 20)
			if _, err := DecodeRequestWith([]byte(body), DecodeOptions{Tools: cache}); err == nil {
				t.Fatal("decoded without an error")
			}
			if n := cachedLists(cache); n != 0 {
				t.Fatalf("a refused request left %d lists in the cache", n)
			}
		})
	}
}

func TestToolCacheFailsWhatFollowsAKeptList(t *testing.T) {
	tools := string(toolsBody(20))
	cache := NewToolCache(1 << 20)
	decodeWith(t, cache, "", tools)
	bad := strings.TrimSuffix(tools, "}") + `,"temperature":"hot"}`
	_, wantErr := DecodeRequest([]byte(bad))
	_, err := DecodeRequestWith([]byte(bad), DecodeOptions{Tools: cache})
	if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
		t.Fatalf("error through the cache %v, without it %v", err, wantErr)
	}
}

func TestToolCacheCopiesAreTheRequests(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewToolCache(1 << 20)
	decodeWith(t, cache, "", body)
	first := decodeWith(t, cache, "", body)
	first.Tools[0].Name = "changed"
	first.Tools = append(first.Tools[:1], first.Tools[2:]...)
	second := decodeWith(t, cache, "", body)
	if second.Tools[0].Name != "tool_0" || len(second.Tools) != 20 || second.Tools[1].Name != "tool_1" {
		t.Fatalf("a request's changes to its tools reached the next request: %d tools, %q, %q", len(second.Tools), second.Tools[0].Name, second.Tools[1].Name)
	}
}

func TestToolCacheLeavesShortListsOut(t *testing.T) {
	cache := NewToolCache(1 << 20)
	decodeWith(t, cache, "", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`)
	if n := cachedLists(cache); n != 0 {
		t.Fatalf("a list shorter than %d bytes was kept (%d lists)", toolKeyBytes, n)
	}
}

func TestToolCacheHoldsItsSize(t *testing.T) {
	const max = 64 << 10
	cache := NewToolCache(max)
	bodies := make([]string, 20)
	for i := range bodies {
		// Lists of ~1 KB of text (~4 KB kept) that differ in their first
		// bytes: more than the cache holds.
		bodies[i] = strings.Replace(string(toolsBody(5)), `"tool_0"`, fmt.Sprintf(`"first_%d"`, i), 1)
		decodeWith(t, cache, "", bodies[i])
		cache.mu.Lock()
		size, n := cache.size, cache.order.Len()
		cache.mu.Unlock()
		if size > max {
			t.Fatalf("after %d lists the cache holds %d bytes, more than its %d", i+1, size, max)
		}
		if n == 0 {
			t.Fatalf("after %d lists the cache holds none", i+1)
		}
	}
	// The most recent list is kept, the first went first.
	cache.mu.Lock()
	newest := string(cache.order.Front().Value.(*cachedTools).text)
	oldest := string(cache.order.Back().Value.(*cachedTools).text)
	cache.mu.Unlock()
	if !strings.Contains(newest, `"first_19"`) {
		t.Errorf("the most recently used list is not the last one added")
	}
	if strings.Contains(oldest, `"first_0"`) {
		t.Errorf("the first list is still kept after %d others", len(bodies)-1)
	}
	// A list of more than an eighth of the cache is not kept.
	big := NewToolCache(8 << 10)
	decodeWith(t, big, "", string(toolsBody(20)))
	if n := cachedLists(big); n != 0 {
		t.Fatalf("a list of more than an eighth of the cache was kept")
	}
}

func TestToolCacheConcurrentRequests(t *testing.T) {
	bodies := []string{string(toolsBody(30)), mixedToolsBody("m"), mixedToolsBody("other")}
	want := make([]*Request, len(bodies))
	for i, b := range bodies {
		var err error
		if want[i], err = DecodeRequest([]byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	cache := NewToolCache(1 << 20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 50 {
				i := (g + k) % len(bodies)
				req, err := DecodeRequestWith([]byte(bodies[i]), DecodeOptions{Tools: cache, Scope: fmt.Sprint(g % 2)})
				if err != nil {
					t.Error(err)
					return
				}
				if !reflect.DeepEqual(req, want[i]) {
					t.Errorf("goroutine %d, request %d: differs from the decode without the cache", g, k)
					return
				}
				req.Tools[0].Name = "mine" // each request's own copy
			}
		})
	}
	wg.Wait()
}
