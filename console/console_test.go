package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/sqlite"
)

const token = "s3cret-operator-token"

func newConsole(t *testing.T, opts *Options) (*httptest.Server, store.Store) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Memory, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if opts == nil {
		opts = &Options{}
	}
	opts.Store, opts.Token = db, token
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv, db
}

// get fetches path with the bearer token (none when bearer is ""),
// without following redirects.
func get(t *testing.T, srv *httptest.Server, path, bearer string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func save(t *testing.T, s store.Store, rec *store.Record) {
	t.Helper()
	if err := s.SaveResponse(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// stored is a response of tenant, model and status, created at second at.
func stored(id, tenant, model, status string, at int64) *store.Record {
	return &store.Record{ID: id, Tenant: tenant, Status: status, CreatedAt: at,
		Response: json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","model":%q,"status":%q,"created_at":%d,"output":[]}`, id, model, status, at))}
}

var listedID = regexp.MustCompile(`href="/responses/(resp_[A-Za-z0-9_]+)" class="id"`)

func listed(body string) []string {
	var ids []string
	for _, m := range listedID.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

func TestAuth(t *testing.T) {
	srv, db := newConsole(t, nil)
	save(t, db, stored("resp_1", "acme", "m", responses.ResponseCompleted, 100))

	for _, tc := range []struct {
		name, path, bearer string
	}{
		{"no token", "/responses", ""},
		{"wrong bearer", "/responses", "wrong"},
		{"a prefix of the token", "/responses", token[:5]},
		{"one response", "/responses/resp_1", ""},
		{"live", "/live", ""},
		{"engines", "/engines", ""},
		{"wrong token in the query", "/responses?token=wrong", ""},
	} {
		resp, body := get(t, srv, tc.path, tc.bearer)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %q, want 401 with WWW-Authenticate", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if strings.Contains(body, "resp_1") && tc.path == "/responses" {
			t.Errorf("%s: a refused page lists responses", tc.name)
		}
		if resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s: refused with a cookie", tc.name)
		}
	}
	// A forged cookie is refused too.
	if resp, _ := get(t, srv, "/responses", "", &http.Cookie{Name: cookieName, Value: token}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token as the cookie: %d, want 401", resp.StatusCode)
	}

	if resp, body := get(t, srv, "/responses", token); resp.StatusCode != http.StatusOK || !slices.Equal(listed(body), []string{"resp_1"}) {
		t.Errorf("bearer: %d, lists %v", resp.StatusCode, listed(body))
	}

	// ?token= sets the cookie and takes the token out of the URL.
	resp, _ := get(t, srv, "/responses?status=completed&token="+token, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/responses?status=completed" {
		t.Fatalf("?token=: %d to %q, want 303 to /responses?status=completed", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookie := sessionCookie(t, resp)
	if resp, body := get(t, srv, "/responses", "", cookie); resp.StatusCode != http.StatusOK || !slices.Equal(listed(body), []string{"resp_1"}) {
		t.Errorf("with the cookie: %d, lists %v", resp.StatusCode, listed(body))
	}

	// The login form: a wrong token is refused, the right one sets the
	// cookie and goes back to the page asked for, never elsewhere.
	form := func(tok, next string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader(url.Values{"token": {tok}, "next": {next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, _ := do(t, req)
		return resp
	}
	if resp := form("wrong", "/live"); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("login with a wrong token: %d, cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	resp = form(token, "/live")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/live" {
		t.Errorf("login: %d to %q, want 303 to /live", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, srv, "/live", "", sessionCookie(t, resp)); resp.StatusCode != http.StatusOK {
		t.Errorf("the login's cookie: %d", resp.StatusCode)
	}
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "javascript:alert(1)"} {
		if resp := form(token, next); resp.Header.Get("Location") != "/responses" {
			t.Errorf("login with next %q goes to %q, want /responses", next, resp.Header.Get("Location"))
		}
	}

	// The stylesheet and the form need no token; every page forbids
	// scripts and loading from elsewhere.
	resp, css := get(t, srv, "/static/console.css", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(css, "svg.timeline") {
		t.Errorf("stylesheet: %d", resp.StatusCode)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

// TestLoginRedirectStaysOnConsole: the page a sign-in goes back to is a
// path of the console's own, whatever next or the address says. A
// browser reads a backslash as a slash and drops tabs and newlines, so
// /\evil.example and /\t/evil.example are //evil.example to it: another
// site.
func TestLoginRedirectStaysOnConsole(t *testing.T) {
	srv, _ := newConsole(t, nil)
	form := func(next string) string {
		req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader(url.Values{"token": {token}, "next": {next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, _ := do(t, req)
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("login with next %q: %d, want 303", next, resp.StatusCode)
		}
		return resp.Header.Get("Location")
	}
	for _, next := range []string{
		`/\evil.example`, `/\/evil.example`, `/%5Cevil.example`, `/%5C%5Cevil.example`, "/%2Fevil.example", "/%2F%2Fevil.example",
		"//evil.example", "///evil.example", "/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example", "/\x00x", "/%09/evil.example",
		"https://evil.example/", "http:/evil.example", "javascript:alert(1)", "evil.example", "", " /live",
	} {
		if got := form(next); got != "/responses" {
			t.Errorf("login with next %q goes to %q, want /responses", next, got)
		}
	}
	// The next of the sign-in form, as the login page and a refused page
	// write it, is the same.
	for _, path := range []string{`/login?next=/%5Cevil.example`, `/login?next=//evil.example`, `/\evil.example`} {
		if _, body := get(t, srv, path, ""); !strings.Contains(body, `name="next" value="/responses"`) {
			t.Errorf("GET %s: the form's next is not /responses:\n%s", path, body)
		}
	}
	// A page of the console is kept, with its query.
	for next, want := range map[string]string{
		"/live":                               "/live",
		"/responses?status=completed&limit=5": "/responses?limit=5&status=completed",
		"/responses/resp_1#timeline":          "/responses/resp_1",
		"/responses/a%20b":                    "/responses/a%20b",
	} {
		if got := form(next); got != want {
			t.Errorf("login with next %q goes to %q, want %q", next, got, want)
		}
	}

	// ?token= goes back to the address without it: never to another site.
	for path, want := range map[string]string{
		"//evil.example/x":    "/responses",
		`/\evil.example`:      "/responses",
		"/%5Cevil.example":    "/responses",
		"/%2F%2Fevil.example": "/responses",
		"/live?status=x":      "/live?status=x",
	} {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		// The path as written: the client sends it as it is.
		req, err := http.NewRequest("GET", srv.URL+path+sep+"token="+token, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := do(t, req)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("%s?token=: %d to %q, want 303 to %q", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}

func sessionCookie(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	return namedCookie(t, resp, cookieName)
}

// namedCookie is resp's session cookie of that name, checked for what
// every session cookie is.
func namedCookie(t *testing.T, resp *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == name {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Value == token || c.Value == "" || c.Path != "/" || c.Domain != "" {
				t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, no Domain, not the token itself", c)
			}
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", name, resp.Header["Set-Cookie"])
	return nil
}

// TestSessionCookieSecure: the cookie is Secure, and named __Host- (the
// browser then refuses it from plain HTTP, from another host or path)
// whenever the console is reached over HTTPS, directly or through a proxy
// that says so in X-Forwarded-Proto; plain otherwise (a browser drops a
// Secure cookie set over plain HTTP).
func TestSessionCookieSecure(t *testing.T) {
	plain, _ := newConsole(t, nil)
	login := func(srv *httptest.Server, client *http.Client, proto string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/live?token="+token, nil)
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		c := *client
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		proto  string
		secure bool
	}{{"", false}, {"http", false}, {"https", true}, {"HTTPS", true}, {"https, http", true}, {"http, https", false}} {
		resp := login(plain, http.DefaultClient, tc.proto)
		name := cookieName
		if tc.secure {
			name = secureCookieName
		}
		c := namedCookie(t, resp, name)
		if c.Secure != tc.secure || len(resp.Cookies()) != 1 {
			t.Errorf("X-Forwarded-Proto %q: cookies %v, want only %s, Secure=%v", tc.proto, resp.Header["Set-Cookie"], name, tc.secure)
		}
		// The cookie signs the browser in, whichever its name.
		if resp, _ := get(t, plain, "/live", "", c); resp.StatusCode != http.StatusOK {
			t.Errorf("X-Forwarded-Proto %q: the cookie %s: %d", tc.proto, name, resp.StatusCode)
		}
	}
	// A forged __Host- cookie is refused.
	if resp, _ := get(t, plain, "/live", "", &http.Cookie{Name: secureCookieName, Value: token}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token as the __Host- cookie: %d, want 401", resp.StatusCode)
	}

	// Over TLS itself.
	db, err := sqlite.Open(context.Background(), sqlite.Memory, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := New(&Options{Store: db, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	tlsSrv := httptest.NewTLSServer(c)
	defer tlsSrv.Close()
	resp := login(tlsSrv, tlsSrv.Client(), "")
	if c := namedCookie(t, resp, secureCookieName); !c.Secure {
		t.Errorf("over TLS: cookie %v, want Secure", resp.Header["Set-Cookie"])
	}
	// The form's login too.
	req, _ := http.NewRequest("POST", plain.URL+"/login", strings.NewReader(url.Values{"token": {token}, "next": {"/live"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, _ = do(t, req)
	if c := namedCookie(t, resp, secureCookieName); !c.Secure {
		t.Errorf("the form behind HTTPS: cookie %v, want Secure", resp.Header["Set-Cookie"])
	}
}

func TestListFilters(t *testing.T) {
	srv, db := newConsole(t, nil)
	save(t, db, stored("resp_a", "acme", "gpt-oss-20b", responses.ResponseCompleted, 100))
	save(t, db, stored("resp_b", "", "gpt-oss-120b", responses.ResponseFailed, 200))
	save(t, db, stored("resp_c", "acme", "gpt-oss-120b", responses.ResponseCompleted, 300))
	save(t, db, stored("resp_d", "globex", "gpt-oss-20b", responses.ResponseInProgress, 400))

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"resp_d", "resp_c", "resp_b", "resp_a"}},
		{"tenant=acme", []string{"resp_c", "resp_a"}},
		{"tenant=" + url.QueryEscape(anonymousTenant), []string{"resp_b"}},
		{"status=completed", []string{"resp_c", "resp_a"}},
		{"model=gpt-oss-20b", []string{"resp_d", "resp_a"}},
		{"tenant=acme&status=completed&model=gpt-oss-120b", []string{"resp_c"}},
		{"tenant=nobody", nil},
	} {
		resp, body := get(t, srv, "/responses?"+tc.query, token)
		if resp.StatusCode != http.StatusOK || !slices.Equal(listed(body), tc.want) {
			t.Errorf("?%s: %d, lists %v, want %v", tc.query, resp.StatusCode, listed(body), tc.want)
		}
	}
	for _, q := range []string{"status=bogus", "limit=0", "limit=101", "limit=x", "after=resp_nope"} {
		if resp, _ := get(t, srv, "/responses?"+q, token); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

var nextLink = regexp.MustCompile(`href="/responses\?([^"]*)" id="next"`)

func TestListPaging(t *testing.T) {
	srv, db := newConsole(t, nil)
	var want []string
	for i := 7; i >= 1; i-- {
		want = append(want, fmt.Sprintf("resp_%d", i))
	}
	for i := 1; i <= 7; i++ {
		// Two a second: the cursor must break ties.
		save(t, db, stored(fmt.Sprintf("resp_%d", i), "acme", "m", responses.ResponseCompleted, int64(100+i/2)))
	}
	var seen []string
	query := "tenant=acme&limit=3"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		resp, body := get(t, srv, "/responses?"+query, token)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("?%s: %d", query, resp.StatusCode)
		}
		ids := listed(body)
		if len(ids) > 3 {
			t.Fatalf("a page of 3 lists %v", ids)
		}
		seen = append(seen, ids...)
		m := nextLink.FindStringSubmatch(body)
		if m == nil {
			break
		}
		// The next page keeps the filters.
		query = strings.ReplaceAll(m[1], "&amp;", "&")
		if !strings.Contains(query, "tenant=acme") || !strings.Contains(query, "limit=3") {
			t.Errorf("next page's query %q drops the filters", query)
		}
	}
	if !slices.Equal(seen, want) {
		t.Errorf("paged: %v, want %v", seen, want)
	}
}

// timed is a completed response with a tool call and its timeline.
func timed() *store.Record {
	rec := stored("resp_t", "acme", "gpt-oss-20b", responses.ResponseCompleted, 100)
	rec.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	rec.Response = json.RawMessage(`{"id":"resp_t","object":"response","model":"gpt-oss-20b","status":"completed","created_at":100,` +
		`"usage":{"input_tokens":200,"input_tokens_details":{"cached_tokens":150},"output_tokens":30},` +
		`"output":[{"type":"mcp_call","id":"mcp_1","server_label":"t","name":"lookup","arguments":"{\"q\":\"paris\"}","output":"21 degrees","status":"completed"},` +
		`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"It is 21 degrees.","annotations":[]}]}]}`)
	tl := engine.Timeline{Start: 100_000, EndUS: 90_000, Steps: []engine.TimelineStep{
		{Kind: engine.StepTurn, Name: "gpt-oss-20b", Engine: "vllm-0:8000", ItemIDs: []string{"mcp_1"}, StartUS: 1_000, EndUS: 21_000, InputTokens: 100, CachedTokens: 50, OutputTokens: 10},
		{Kind: engine.StepInputRound, Name: "lookup", Server: "t", Round: 1, StartUS: 24_000, EndUS: 30_000},
		{Kind: engine.StepToolCall, Name: "lookup", Server: "t", ItemID: "mcp_1", StartUS: 22_000, EndUS: 34_500},
		{Kind: engine.StepTurn, Name: "gpt-oss-20b", Engine: "vllm-0:8000", ItemIDs: []string{"msg_1"}, StartUS: 35_000, EndUS: 88_000},
		{Kind: engine.StepCleanup, StartUS: 91_000, EndUS: 91_400, Error: "t: cleanup timed out"},
	}}
	rec.Timeline, _ = json.Marshal(tl)
	rec.Events = []json.RawMessage{json.RawMessage(`{"type":"response.created","sequence_number":0}`), json.RawMessage(`{"type":"response.completed","sequence_number":1}`)}
	return rec
}

var stepRow = regexp.MustCompile(`(?s)<tr class="step ([a-z_]+)">.*?class="step-label">([^<]*)<.*?class="num step-duration">([^<]*)<`)

func TestResponsePage(t *testing.T) {
	srv, db := newConsole(t, &Options{TraceURL: "http://jaeger:16686/trace/{trace_id}"})
	save(t, db, timed())
	resp, body := get(t, srv, "/responses/resp_t", token)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
	var got []string
	for _, m := range stepRow.FindAllStringSubmatch(body, -1) {
		got = append(got, m[1]+"|"+m[2]+"|"+m[3])
	}
	want := []string{
		"turn|turn gpt-oss-20b|20.0 ms",
		"input_round|input round 1 of lookup|6.0 ms",
		"tool_call|call lookup|12.5 ms",
		"turn|turn gpt-oss-20b|53.0 ms",
		"cleanup|cleanup pass|400 µs",
	}
	if !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{
		`href="http://jaeger:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"`, // the trace viewer
		`id="duration">90.0 ms<`,                   // the run, from its timeline
		`200 in (75% cached), 30 out`,              // the tokens
		`&#34;arguments&#34;: &#34;{\&#34;q\&#34;`, // the call's input behind a click
		`t: cleanup timed out`,
		`<li>response.created</li>`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the page lacks %s", s)
		}
	}
	// Bars to scale: the second turn (53 ms) is wider than the call
	// (12.5 ms), which is wider than its round (6 ms).
	// The axis spans the whole run: the last bar (the cleanup pass, at
	// 91.4 ms) ends at the drawing's right edge.
	bars := regexp.MustCompile(`<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"`).FindAllStringSubmatch(body, -1)
	if len(bars) != 5 {
		t.Fatalf("%d bars, want 5", len(bars))
	}
	num := func(s string) float64 {
		var f float64
		fmt.Sscan(s, &f)
		return f
	}
	x, w := func(i int) float64 { return num(bars[i][1]) }, func(i int) float64 { return num(bars[i][2]) }
	if !(w(3) > w(2) && w(2) > w(1)) || w(3)/w(1) < 8 || w(3)/w(1) > 9.5 {
		t.Errorf("bar widths %v not to scale", bars)
	}
	if right := x(4) + w(4); right < labelWidth+barsWidth-1 || right > labelWidth+barsWidth+1 || x(0) < labelWidth {
		t.Errorf("bars %v do not span the axis from %d to %d", bars, labelWidth, labelWidth+barsWidth)
	}

	if resp, _ := get(t, srv, "/responses/resp_nope", token); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an absent response: %d, want 404", resp.StatusCode)
	}
	// The list shows the same duration and the tool call.
	_, list := get(t, srv, "/responses", token)
	if !strings.Contains(list, "90.0 ms") || !regexp.MustCompile(`tool-calls">1<`).MatchString(list) || !strings.Contains(list, "200 (75%)") {
		t.Errorf("the list lacks the duration, the tool call or the tokens")
	}
}

func TestLive(t *testing.T) {
	now := time.Unix(1000, 0)
	srv, db := newConsole(t, &Options{Now: func() time.Time { return now }})
	running := stored("resp_run", "acme", "m", responses.ResponseInProgress, 970)
	running.LeaseOwner, running.LeaseUntil = "replica-b", now.Add(20*time.Second)
	save(t, db, running)
	queued := stored("resp_queued", "", "m", responses.ResponseQueued, 990)
	save(t, db, queued)
	save(t, db, stored("resp_done", "acme", "m", responses.ResponseCompleted, 900))
	resp, body := get(t, srv, "/live", token)
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.StatusCode)
	}
	inflight, queue, _ := strings.Cut(body, "Background queue")
	if !slices.Equal(listed(inflight), []string{"resp_run"}) || !strings.Contains(inflight, "replica-b") || !strings.Contains(inflight, "30.00 s") {
		t.Errorf("in flight: %v\n%s", listed(inflight), inflight)
	}
	if !slices.Equal(listed(queue), []string{"resp_queued"}) || !strings.Contains(queue, "waiting") {
		t.Errorf("queue: %v", listed(queue))
	}
}

func TestEngines(t *testing.T) {
	engines := NewEngines()
	srv, _ := newConsole(t, &Options{Engines: engines})
	engines.EngineHealth("vllm-0:8000", true)
	engines.EngineHealth("vllm-1:8000", true)
	engines.EngineRequest("vllm-0:8000")
	engines.EngineInFlight("vllm-0:8000", 3)
	engines.EngineTokens("vllm-0:8000", 1000, 250)
	engines.EngineHealth("vllm-1:8000", false)
	_, body := get(t, srv, "/engines", token)
	row := regexp.MustCompile(`(?s)<tr><td>(vllm-\d:8000)</td><td>.*?>(in service|taken out)<.*?<td class="num">(\d+)</td><td class="num">(\d+)</td><td class="num">(\d+)</td><td class="num">([^<]*)</td>`)
	var got []string
	for _, m := range row.FindAllStringSubmatch(body, -1) {
		got = append(got, strings.Join(m[1:], " "))
	}
	want := []string{"vllm-0:8000 in service 3 1 1000 25%", "vllm-1:8000 taken out 0 0 0 –"}
	if !slices.Equal(got, want) {
		t.Errorf("engines %q, want %q", got, want)
	}
}

func TestNewRefusesWithoutToken(t *testing.T) {
	db, err := sqlite.Open(context.Background(), sqlite.Memory, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := New(&Options{Store: db}); err == nil {
		t.Error("a console without a token")
	}
	if _, err := New(&Options{Store: db, Token: strings.Repeat("x", MinTokenLength-1)}); err == nil {
		t.Errorf("a console with a token of %d characters", MinTokenLength-1)
	}
	if _, err := New(&Options{Store: db, Token: strings.Repeat("é", MinTokenLength)}); err != nil {
		t.Errorf("a token of %d characters: %v", MinTokenLength, err)
	}
	if _, err := New(&Options{Store: db, Token: token, TraceURL: "http://jaeger/trace/"}); err == nil {
		t.Error("a trace URL without {trace_id}")
	}
}

// clock is a time the test sets, read by the console's handlers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestFailedSignInsLimited: after 10 failed tokens in a minute, from any
// client and by any way (the form, ?token=, a bearer header), the console
// takes no token at all, right or wrong, until the minute is over: 429
// with Retry-After. A browser signed in before keeps its session.
func TestFailedSignInsLimited(t *testing.T) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	srv, _ := newConsole(t, &Options{Now: clk.now})
	signedIn := sessionCookie(t, func() *http.Response { r, _ := get(t, srv, "/live?token="+token, ""); return r }())

	form := func(tok string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader(url.Values{"token": {tok}, "next": {"/live"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, _ := do(t, req)
		return resp
	}
	query := func(tok string) *http.Response {
		r, _ := get(t, srv, "/live?token="+url.QueryEscape(tok), "")
		return r
	}
	bearer := func(tok string) *http.Response { r, _ := get(t, srv, "/live", tok); return r }
	ways := map[string]func(string) *http.Response{"form": form, "?token=": query, "bearer": bearer}
	wantRefused := func(when string, resp *http.Response, retryAfter string) {
		t.Helper()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != retryAfter || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s: %d, Retry-After %q, cookie %q; want 429, Retry-After %s, no cookie", when, resp.StatusCode,
				resp.Header.Get("Retry-After"), resp.Header.Get("Set-Cookie"), retryAfter)
		}
	}
	wantAccepted := func(when string, resp *http.Response) {
		t.Helper()
		if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d, want the token taken", when, resp.StatusCode)
		}
	}

	// Ten failures, spread over 50 s and the three ways: each is a 401.
	for i := range 10 {
		way := []string{"form", "?token=", "bearer"}[i%3]
		if resp := ways[way]("wrong-token-" + strconv.Itoa(i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d (%s): %d, want 401", i+1, way, resp.StatusCode)
		}
		clk.advance(5 * time.Second)
	}
	// 50 s into the minute: the right token is refused too, every way.
	for way, try := range ways {
		wantRefused("the right token by "+way+" after 10 failures", try(token), "10")
		wantRefused("a wrong token by "+way+" after 10 failures", try("wrong-token"), "10")
	}
	if resp, _ := get(t, srv, "/live", "", signedIn); resp.StatusCode != http.StatusOK {
		t.Errorf("a browser signed in before: %d, want 200", resp.StatusCode)
	}
	clk.advance(9*time.Second + 500*time.Millisecond)
	wantRefused("half a second before the minute ends", form(token), "1")

	// The minute is over: the right token is taken, a wrong one is a 401
	// again, and a new minute starts its count from nothing.
	clk.advance(500 * time.Millisecond)
	wantAccepted("the right token once the minute is over", form(token))
	for i := range 9 {
		if resp := query("wrong-token"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d of a new minute: %d, want 401", i+1, resp.StatusCode)
		}
	}
	wantAccepted("after 9 failures", bearer(token))
	// The window is fixed: nine failures, a minute, nine more, and still
	// no 429.
	clk.advance(time.Minute)
	for i := range 9 {
		if resp := form("wrong-token"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d of the third minute: %d, want 401", i+1, resp.StatusCode)
		}
	}
	wantAccepted("after 9 more failures a minute later", query(token))
	if resp := form("wrong-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the tenth failure: %d, want 401", resp.StatusCode)
	}
	wantRefused("the eleventh attempt", bearer(token), "60")
}
