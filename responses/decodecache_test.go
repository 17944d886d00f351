package responses

import (
	"fmt"
	"reflect"
	"slices"
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
func decodeWith(t *testing.T, cache *DecodeCache, scope, body string) *Request {
	t.Helper()
	req, err := DecodeRequestWith([]byte(body), DecodeOptions{Cache: cache, Scope: scope})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return req
}

// cachedLists returns how many lists c holds.
func cachedLists(c *DecodeCache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func TestDecodeCacheToolsGivesWhatTheDecodeGives(t *testing.T) {
	for name, body := range map[string]string{
		"100 function tools": string(toolsBody(100)),
		"mixed":              mixedToolsBody("m"),
	} {
		t.Run(name, func(t *testing.T) {
			want, err := DecodeRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
			first := decodeWith(t, cache, "", body)
			if n := cachedLists(cache); n != 1 {
				t.Fatalf("the cache holds %d lists after the first request, want 1", n)
			}
			second := decodeWith(t, cache, "", body)
			for i, got := range []*Request{first, second} {
				if !sameDecode(got, want) {
					t.Errorf("request %d through the cache differs from the decode without it:\n got %+v\nwant %+v", i+1, got.Tools, want.Tools)
				}
			}
		})
	}
}

func TestDecodeCacheToolsHitSkipsTheWalk(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
	decodeWith(t, cache, "", body)
	markFirstTool(cache, "from_the_cache")
	if got := decodeWith(t, cache, "", body).Tools[0].Name; got != "from_the_cache" {
		t.Fatalf("second request's first tool is %q: the list was decoded again", got)
	}
	// Another body with the same tools, other fields around them.
	other := strings.Replace(body, `"input":"#say ok"`, `"input":"other","temperature":1`, 1)
	if got := decodeWith(t, cache, "", other).Tools[0].Name; got != "from_the_cache" {
		t.Fatalf("a request with the same tools elsewhere in its body: first tool %q", got)
	}
}

func TestDecodeCacheToolsKeepsScopesApart(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
	decodeWith(t, cache, "tenant-a", body)
	markFirstTool(cache, "tenant_a_copy")
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

func TestDecodeCacheToolsComparesTheWholeList(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
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
	if !sameDecode(got, want) {
		t.Fatalf("a list that differs after its first bytes: last tool %q, want %q", got.Tools[19].Name, want.Tools[19].Name)
	}
	// Both lists are kept, found by the same first bytes, and each is
	// found again.
	if n := cachedLists(cache); n != 2 {
		t.Fatalf("the cache holds %d lists, want 2", n)
	}
	for _, b := range []string{body, changed} {
		want, _ := DecodeRequest([]byte(b))
		if got := decodeWith(t, cache, "", b); !sameDecode(got, want) {
			t.Fatalf("again: last tool %q, want %q", got.Tools[19].Name, want.Tools[19].Name)
		}
	}
	if n := cachedLists(cache); n != 2 {
		t.Fatalf("the cache holds %d lists after finding them again, want 2", n)
	}
}

func TestDecodeCacheToolsRefusedRequestsKeepNothing(t *testing.T) {
	tools := string(toolsBody(20))
	for name, body := range map[string]string{
		"a bad field after the tools":    strings.TrimSuffix(tools, "}") + `,"temperature":"hot"}`,
		"text after the body":            tools + `x`,
		"a bad tool after good ones":     strings.Replace(tools, `]}`, `,{"type":"function","name":"bad","parameters":{"type":}}]}`, 1),
		"too many input items (a limit)": strings.Replace(tools, `"input":"#say ok"`, `"input":[`+strings.Repeat(`{"role":"user","content":"x"},`, MaxInputItems)+`{"role":"user","content":"x"}]`, 1),
		// Text that is not valid Unicode is found once the walk is
		// done: the tools it decoded must not be kept by then.
		"invalid UTF-8 in a tool":       strings.Replace(tools, `Looks up thing 3.`, "Looks up thing \xff.", 1),
		"a lone surrogate in a tool":    strings.Replace(tools, `Looks up thing 3.`, `Looks up thing \ud800.`, 1),
		"invalid UTF-8 after the tools": strings.TrimSuffix(tools, "}") + ",\"instructions\":\"\xfe\"}",
	} {
		t.Run(name, func(t *testing.T) {
			cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
			if _, err := DecodeRequestWith([]byte(body), DecodeOptions{Cache: cache}); err == nil {
				t.Fatal("decoded without an error")
			}
			if n := cachedLists(cache); n != 0 {
				t.Fatalf("a refused request left %d lists in the cache", n)
			}
		})
	}
}

func TestDecodeCacheToolsFailsWhatFollowsAKeptList(t *testing.T) {
	tools := string(toolsBody(20))
	// The kept list is not checked again; the text around it is.
	for name, bad := range map[string]string{
		"a bad field after it":           strings.TrimSuffix(tools, "}") + `,"temperature":"hot"}`,
		"invalid UTF-8 after it":         strings.TrimSuffix(tools, "}") + ",\"instructions\":\"\xff\"}",
		"invalid UTF-8 before it":        strings.Replace(tools, `"model":"m"`, "\"model\":\"m\xc3\"", 1),
		"a lone surrogate before it":     strings.Replace(tools, `"input":"#say ok"`, `"input":"#say \udc00"`, 1),
		"a lone surrogate just after it": strings.TrimSuffix(tools, "}") + `,"instructions":"\ud800"}`,
	} {
		t.Run(name, func(t *testing.T) {
			cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
			decodeWith(t, cache, "", tools)
			_, wantErr := DecodeRequest([]byte(bad))
			_, err := DecodeRequestWith([]byte(bad), DecodeOptions{Cache: cache})
			if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
				t.Fatalf("error through the cache %v, without it %v", err, wantErr)
			}
		})
	}
}

func TestDecodeCacheToolsCopiesAreTheRequests(t *testing.T) {
	body := string(toolsBody(20))
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
	decodeWith(t, cache, "", body)
	first := decodeWith(t, cache, "", body)
	first.Tools[0].Name = "changed"
	first.Tools = append(first.Tools[:1], first.Tools[2:]...)
	second := decodeWith(t, cache, "", body)
	if second.Tools[0].Name != "tool_0" || len(second.Tools) != 20 || second.Tools[1].Name != "tool_1" {
		t.Fatalf("a request's changes to its tools reached the next request: %d tools, %q, %q", len(second.Tools), second.Tools[0].Name, second.Tools[1].Name)
	}
}

func TestDecodeCacheToolsLeavesShortListsOut(t *testing.T) {
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 20})
	decodeWith(t, cache, "", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`)
	if n := cachedLists(cache); n != 0 {
		t.Fatalf("a list shorter than %d bytes was kept (%d lists)", keyBytes, n)
	}
}

func TestDecodeCacheToolsHoldsItsSize(t *testing.T) {
	const max = 64 << 10
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: max})
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
	newest := string(cache.order.Front().Value.(*cachedList).text)
	oldest := string(cache.order.Back().Value.(*cachedList).text)
	cache.mu.Unlock()
	if !strings.Contains(newest, `"first_19"`) {
		t.Errorf("the most recently used list is not the last one added")
	}
	if strings.Contains(oldest, `"first_0"`) {
		t.Errorf("the first list is still kept after %d others", len(bodies)-1)
	}
	// A list of more than an eighth of the cache is not kept.
	big := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 10})
	decodeWith(t, big, "", string(toolsBody(20)))
	if n := cachedLists(big); n != 0 {
		t.Fatalf("a list of more than an eighth of the cache was kept")
	}
}

func TestDecodeCacheToolsConcurrentRequests(t *testing.T) {
	decodeConcurrently(t, []string{string(toolsBody(30)), mixedToolsBody("m"), mixedToolsBody("other")},
		func(req *Request) { req.Tools[0].Name = "mine" })
}

// decodeConcurrently decodes bodies in turn from several goroutines of two
// scopes through one cache, each request compared with the decode without
// it and then changed by change, as its own copy.
func decodeConcurrently(t *testing.T, bodies []string, change func(*Request)) {
	want := make([]*Request, len(bodies))
	for i, b := range bodies {
		want[i] = mustDecode(t, b)
	}
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 40 {
				i := (g + k) % len(bodies)
				req, err := DecodeRequestWith([]byte(bodies[i]), DecodeOptions{Cache: cache, Scope: fmt.Sprint(g % 2)})
				if err != nil {
					t.Error(err)
					return
				}
				if !sameDecode(req, want[i]) {
					t.Errorf("goroutine %d, request %d: differs from the decode without the cache", g, k)
					return
				}
				change(req)
			}
		})
	}
	wg.Wait()
}

// conversation returns n input items of the shapes a client resends: user
// messages as strings and as parts, the model's messages, function calls
// and their outputs, reasoning, and an item of a kind the decoder leaves
// to encoding/json (a key it does not take).
func conversation(n int) []string {
	items := make([]string, n)
	for i := range items {
		switch i % 6 {
		case 0:
			items[i] = fmt.Sprintf(`{"role":"user","content":"question %d: what is the weather like in the city today?"}`, i)
		case 1:
			items[i] = fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[{"type":"summary_text","text":"thinking %d"}]}`, i, i)
		case 2:
			items[i] = fmt.Sprintf(`{"type":"function_call","call_id":"call_%d","name":"lookup","arguments":"{\"city\":\"Paris %d\"}"}`, i, i)
		case 3:
			items[i] = fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":"sunny, %d degrees"}`, i-1, i)
		case 4:
			items[i] = fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d \u00e9","annotations":[]}],"status":"completed","x_extra":{"kept":%d}}`, i, i)
		default:
			items[i] = fmt.Sprintf(` {"type":"message","role":"user","content":[{"type":"input_text","text":"more %d"}]}`+"\n", i)
		}
	}
	return items
}

// inputBody is a store:false request whose input is items.
func inputBody(items []string) string {
	return `{"model":"m","store":false,"input":[` + strings.Join(items, ",") + `],"tools":[]}`
}

// markFirstTool renames the first tool of every tool list cache holds, as
// nothing else may, to see where a request's tools came from.
func markFirstTool(cache *DecodeCache, name string) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	for el := cache.order.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*cachedList); e.tools != nil {
			e.tools[0].Name = name
		}
	}
}

// markFirstItem changes the first item of every input list cache holds,
// as nothing else may, to see where a request's items came from.
func markFirstItem(cache *DecodeCache, text string) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	for el := cache.order.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*cachedList); e.items != nil {
			e.items[0].Role = text
		}
	}
}

// sameDecode reports whether got, decoded through a cache, is want, the
// decode without it: Input.Shared says only where the items are held.
func sameDecode(got, want *Request) bool {
	g := *got
	g.Input.Shared = want.Input.Shared
	return reflect.DeepEqual(&g, want)
}

// mustDecode decodes body without a cache.
func mustDecode(t *testing.T, body string) *Request {
	t.Helper()
	req, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestDecodeCacheInputGivesWhatTheDecodeGives(t *testing.T) {
	items := conversation(60)
	for name, body := range map[string]string{
		"history":      string(historyBody(300)),
		"conversation": inputBody(items),
	} {
		t.Run(name, func(t *testing.T) {
			want := mustDecode(t, body)
			cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
			for i := range 3 {
				if got := decodeWith(t, cache, "", body); !sameDecode(got, want) {
					t.Fatalf("request %d through the cache differs from the decode without it", i+1)
				}
				if n := cachedLists(cache); n != 1 {
					t.Fatalf("after request %d the cache holds %d lists, want 1", i+1, n)
				}
			}
			markFirstItem(cache, "from_the_cache")
			if got := decodeWith(t, cache, "", body).Input.Items[0].Role; got != "from_the_cache" {
				t.Fatalf("the same input again was decoded again (first item's role %q)", got)
			}
		})
	}
}

func TestDecodeCacheInputGrows(t *testing.T) {
	items := conversation(66)
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
	// A conversation's turns: each resends the one before and adds to it.
	for _, n := range []int{12, 13, 30, 31, 66} {
		body := inputBody(items[:n])
		want := mustDecode(t, body)
		got := decodeWith(t, cache, "", body)
		if !sameDecode(got, want) {
			t.Fatalf("%d items: differs from the decode without the cache", n)
		}
		if k := cachedLists(cache); k != 1 {
			t.Fatalf("%d items: the cache holds %d lists, want the latest turn's alone", n, k)
		}
	}
	// The next turn takes the kept items and decodes only its own.
	markFirstItem(cache, "from_the_cache")
	body := inputBody(append(items[:66:66], `{"role":"user","content":"one more"}`))
	got := decodeWith(t, cache, "", body)
	if got.Input.Items[0].Role != "from_the_cache" {
		t.Fatalf("the next turn decoded the kept items again (first item's role %q)", got.Input.Items[0].Role)
	}
	if n := len(got.Input.Items); n != 67 || got.Input.Items[66].Text() != "one more" {
		t.Fatalf("the next turn has %d items, last %q", n, got.Input.Items[n-1].Text())
	}
}

func TestDecodeCacheInputBranches(t *testing.T) {
	items := conversation(40)
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
	first := inputBody(items)
	decodeWith(t, cache, "", first)
	// The same first 20 items, then others: a conversation edited at its
	// 21st item, or another one with the same start.
	other := append(items[:20:20], conversation(60)[40:]...)
	for i := 20; i < len(other); i++ {
		other[i] = strings.ReplaceAll(other[i], "Paris", "Rome")
	}
	second := inputBody(other)
	if got, want := decodeWith(t, cache, "", second), mustDecode(t, second); !sameDecode(got, want) {
		t.Fatal("the branch differs from the decode without the cache")
	}
	if n := cachedLists(cache); n != 2 {
		t.Fatalf("the cache holds %d lists, want both branches", n)
	}
	for _, body := range []string{first, second} {
		if got, want := decodeWith(t, cache, "", body), mustDecode(t, body); !sameDecode(got, want) {
			t.Fatal("a branch again differs from the decode without the cache")
		}
	}
}

func TestDecodeCacheInputScopesApart(t *testing.T) {
	body := string(historyBody(50))
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
	decodeWith(t, cache, "tenant-a", body)
	markFirstItem(cache, "tenant_a_copy")
	if got := decodeWith(t, cache, "tenant-b", body).Input.Items[0].Role; got != "user" {
		t.Fatalf("tenant-b got role %q: another tenant's items", got)
	}
}

// A request decoded in full owns its items: what it writes in them
// does not reach the list the cache keeps. One that sent a kept list
// again reads that list's items (Input.Shared), clipped, so that an
// append copies them and writes nothing past the kept list's end.
func TestDecodeCacheInputCopiesAreTheRequests(t *testing.T) {
	body := string(historyBody(50))
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
	first := decodeWith(t, cache, "", body)
	if first.Input.Shared {
		t.Fatal("the first decode of a list is shared; want its own items")
	}
	first.Input.Items[0].ID = "msg_given"
	first.Input.Items[1].Content = append(first.Input.Items[1].Content, ContentPart{Type: PartOutputText, Text: "added"})
	first.Input.Items = append(first.Input.Items, Item{Type: ItemMessage, Role: "assistant"})
	second := decodeWith(t, cache, "", body)
	if second.Input.Items[0].ID != "" || len(second.Input.Items[1].Content) != 1 || len(second.Input.Items) != len(first.Input.Items)-1 {
		t.Fatalf("a request's changes to its items reached the next request: id %q, %d parts, %d items",
			second.Input.Items[0].ID, len(second.Input.Items[1].Content), len(second.Input.Items))
	}
	if !second.Input.Shared {
		t.Fatal("a kept list sent again is not shared")
	}
	grown := append(second.Input.Items, Item{Type: ItemMessage, Role: "assistant", ID: "msg_grown"})
	if &grown[0] == &second.Input.Items[0] {
		t.Fatal("an append to a shared list wrote past its end, into the kept list's room")
	}
	if !sameDecode(decodeWith(t, cache, "", body), mustDecode(t, body)) {
		t.Fatal("the kept list changed")
	}
}

func TestDecodeCacheInputRefusals(t *testing.T) {
	items := conversation(30)
	for name, tail := range map[string]string{
		"a bad item after the kept ones":   `{"type":"function_call","call_id":7}`,
		"text that is not JSON after them": `{"role":"user","content":"x"`,
		// The kept items are not checked again; the items after them are.
		"invalid UTF-8 after them":    "{\"role\":\"user\",\"content\":\"\xff\"}",
		"a lone surrogate after them": `{"role":"user","content":"\ud83d"}`,
	} {
		t.Run(name, func(t *testing.T) {
			cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
			decodeWith(t, cache, "", inputBody(items))
			bad := inputBody(append(items[:30:30], tail))
			_, wantErr := DecodeRequest([]byte(bad))
			_, err := DecodeRequestWith([]byte(bad), DecodeOptions{Cache: cache})
			if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
				t.Fatalf("error through the cache %v, without it %v", err, wantErr)
			}
			if n := cachedLists(cache); n != 1 {
				t.Fatalf("the cache holds %d lists after a refused request, want the first alone", n)
			}
		})
	}
	t.Run("invalid text beside the whole kept input", func(t *testing.T) {
		cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
		body := inputBody(items[:30])
		decodeWith(t, cache, "", body)
		bad := strings.Replace(body, `"model":`, "\"instructions\":\"\xff\",\"model\":", 1)
		if bad == body {
			t.Fatal("the body has no model to put the text before")
		}
		_, wantErr := DecodeRequest([]byte(bad))
		_, err := DecodeRequestWith([]byte(bad), DecodeOptions{Cache: cache})
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
			t.Fatalf("error through the cache %v, without it %v", err, wantErr)
		}
	})
	t.Run("too many items", func(t *testing.T) {
		// Room enough to note the items' ends of a body this long.
		cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 1 << 30})
		short := conversation(30)
		decodeWith(t, cache, "", inputBody(short))
		many := append(short, strings.Split(strings.Repeat(`{"role":"user","content":"x"}|`, MaxInputItems-29), "|")[:MaxInputItems-29]...)
		_, wantErr := DecodeRequest([]byte(inputBody(many)))
		_, err := DecodeRequestWith([]byte(inputBody(many)), DecodeOptions{Cache: cache})
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
			t.Fatalf("error through the cache %v, without it %v", err, wantErr)
		}
	})
}

func TestDecodeCacheInputConcurrentTurns(t *testing.T) {
	items := conversation(48)
	bodies := make([]string, 4)
	for i := range bodies {
		bodies[i] = inputBody(items[:12*(i+1)])
	}
	decodeConcurrently(t, bodies, func(req *Request) {
		if req.Input.Shared {
			// Input.Shared's contract: copied before a write.
			req.Input.Items = slices.Clone(req.Input.Items)
		}
		req.Input.Items[0].ID = "mine"
	})
}

// TestDecodeCacheInputTurnsShareTheirItems: the lists of one
// conversation's turns keep their items in one array, each turn's past
// the one's before, and a branch from an earlier turn gets a copy; every
// request, of any turn or branch, still gets what the decode without the
// cache gives.
func TestDecodeCacheInputTurnsShareTheirItems(t *testing.T) {
	items := conversation(48)
	cache := NewDecodeCache(DecodeCacheOptions{MaxBytes: 8 << 20})
	var bodies []string
	var first *Item
	for _, n := range []int{30, 32, 36} {
		bodies = append(bodies, inputBody(items[:n]))
		decodeWith(t, cache, "", bodies[len(bodies)-1])
		cache.mu.Lock()
		e := cache.order.Front().Value.(*cachedList)
		cache.mu.Unlock()
		if first == nil {
			first = &e.items[0]
		} else if &e.items[0] != first {
			t.Errorf("the turn of %d items copied the items of the turn before", n)
		}
	}
	// A branch from the second turn: its own copy.
	branch := append(items[:32:32], `{"role":"user","content":"another question"}`)
	bodies = append(bodies, inputBody(branch))
	decodeWith(t, cache, "", bodies[len(bodies)-1])
	for _, body := range append(bodies, inputBody(items)) {
		if got, want := decodeWith(t, cache, "", body), mustDecode(t, body); !sameDecode(got, want) {
			t.Fatalf("a request of %d bytes differs from its decode without the cache", len(body))
		}
	}

	// Two requests that grow from the same list at once (both found it
	// before either was kept): the first takes the room past its items,
	// the second gets a copy, and neither writes over the other's.
	prefix := &cachedList{items: ownItems(nil, 0, mustDecode(t, inputBody(items[:30])).Input.Items)}
	a := mustDecode(t, inputBody(items[:32])).Input.Items
	b := mustDecode(t, inputBody(append(items[:30:30], items[40:42]...))).Input.Items
	grownA, grownB := ownItems(prefix, 30, a), ownItems(prefix, 30, b)
	if &grownA[0] != &prefix.items[0] || &grownB[0] == &prefix.items[0] {
		t.Error("not the first growth alone shares the list's items")
	}
	if !reflect.DeepEqual(grownA, a) || !reflect.DeepEqual(grownB, b) {
		t.Error("two growths from one list wrote over each other")
	}
}
