package upstream

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomgate/loom/model"
)

// loadFactor bounds an engine's load when it takes a new session: an
// engine with more than loadFactor times the average count of requests in
// flight passes the session on to the next engine on the ring
// (consistent hashing with bounded loads), so that a hot key cannot
// swamp one engine.
const loadFactor = 1.25

// ejectAfter5xx is how many 5xx answers in a row take an engine out. A
// refused or reset connection takes it out at once: the engine is not
// there. One 5xx may be one request's fault (a prompt the engine chokes
// on), and with one engine, taking it out turns every replica's /readyz
// to 503 at once, which a balancer in front reads as the whole service
// gone.
const ejectAfter5xx = 3

// hotFactor is how far over the load bound a session's own engine must be
// before one of its turns goes elsewhere: a session stays where its
// prefix is cached through the ordinary unevenness of a fleet, and only a
// hot one (many turns at once, as agents sharing one prompt_cache_key
// send) spills rather than swamp its engine.
const hotFactor = 2

// probeTimeout bounds one health probe.
const probeTimeout = 5 * time.Second

// engine is one engine of a Client: where its turns go, how it is
// reached, and what the client knows of its health and load.
type engine struct {
	index int
	// id places the engine on the ring: its base URL as configured.
	id string
	// name is the URL's host:port, for logs and metrics: never
	// credentials, a path or a query (unless two engines share a
	// host:port; then the path tells them apart).
	name string
	// url is parsed once; each request to the engine points at it (nil
	// when it does not parse: every request fails with a 502).
	url  *neturl.URL
	path string // of url, for logs
	// models is probed (GET) while the engine is out; nil: never probed.
	models *neturl.URL
	auth   []string // the Authorization header's value, nil without a key

	inFlight atomic.Int64
	// errors5xx counts the 5xx answers in a row since the engine last
	// answered otherwise (ejectAfter5xx).
	errors5xx atomic.Int32
	// up says the engine takes turns. It is read on every pick; mu
	// orders its changes, the observer's view of them and the prober.
	up      atomic.Bool
	mu      sync.Mutex
	probing bool
}

// newEngine returns the engine at base, posting to base+endpoint and
// probing base+"/models" (probed false: never probed).
func newEngine(index int, base, endpoint, apiKey string, o model.HTTPOptions, probed bool) *engine {
	e := &engine{index: index, id: base}
	u, err := neturl.Parse(base + endpoint)
	if err == nil {
		e.url, e.path, e.name = u, u.Path, u.Host
		if probed {
			e.models, _ = neturl.Parse(base + "/models")
		}
	}
	switch {
	case apiKey != "":
		e.auth = []string{"Bearer " + apiKey}
	case err == nil && u.User != nil && o.HTTPClient == nil:
		// What http.Client.Do adds for a URL with credentials; the
		// transport alone sends none.
		pass, _ := u.User.Password()
		e.auth = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))}
	}
	e.up.Store(true)
	return e
}

// nameEngines makes the engines' names unique: host:port, and the path
// when two share it.
func nameEngines(engines []*engine) {
	seen := map[string]int{}
	for _, e := range engines {
		seen[e.name]++
	}
	for _, e := range engines {
		if base, err := neturl.Parse(e.id); seen[e.name] > 1 && err == nil {
			e.name += strings.TrimSuffix(base.Path, "/")
		}
	}
}

// placement is where one request goes: the engines it may try, in order,
// and the one it is on. It is part of the request's exchange.
type placement struct {
	c     *Client
	order []*engine
	at    *engine
	sent  int // attempts sent
}

// place picks the engine for a request with session key (empty: none).
// With one engine there is nothing to pick. A session's turns go to the
// engine it was placed on, which holds its prefix: a turn sent elsewhere
// pays the whole prefill there and evicts another session's prefix. Only
// when that engine is hotFactor times over the load bound does a turn go
// on around the ring (the session stays). A new session is placed by
// the engines' shares of the sessions (fewestSessions) and by load: it
// goes to its engine on the ring, or, when that one holds more than its
// share or is over the load bound (or out), on around the ring to the
// first healthy engine under both, and stays there. size is the request's
// body, the measure of a session's share. A session's engine that is out loses it to
// the engine that takes it. A request without a key goes to the least busy
// healthy engine. When no engine is healthy, the request goes where it
// would have, and fails or not as the engine answers.
func (c *Client) place(key string, size int) placement {
	p := placement{c: c}
	if len(c.engines) == 1 {
		p.order = c.engines
		p.enter(c.engines[0])
		return p
	}
	if key == "" {
		p.order = c.rotated(int(c.turn.Add(1) % uint64(len(c.engines))))
		p.enter(c.leastBusy(p.order))
		return p
	}
	pos := hash64(key)
	idx := c.ring.order(pos, len(c.engines), make([]int, 0, len(c.engines)))
	p.order = make([]*engine, len(idx))
	for i, x := range idx {
		p.order[i] = c.engines[x]
	}
	home, known := c.sessions.get(pos, int64(size))
	if known {
		k := slices.IndexFunc(p.order, func(e *engine) bool { return e.index == home })
		slices.Reverse(p.order[:k])
		slices.Reverse(p.order[k:])
		slices.Reverse(p.order)
	}
	if known && c.engines[home].up.Load() {
		choice := c.engines[home]
		if bound, ok := c.bound(); ok && choice.inFlight.Load() >= hotFactor*bound {
			choice = c.underBound(p.order)
		}
		p.enter(choice)
		return p
	}
	c.placing.Lock()
	defer c.placing.Unlock()
	if home, known := c.sessions.get(pos, int64(size)); known && c.engines[home].up.Load() {
		// Placed by another request of the session meanwhile.
		p.enter(c.engines[home])
		return p
	}
	choice := c.underBound(c.fewestSessions(p.order, int64(size)))
	c.sessions.put(pos, choice.index, int64(size))
	p.enter(choice)
	return p
}

// fewestSessions returns order with the engines that hold the least of
// the sessions (within half the size being placed of the healthy engine
// that holds least) before the others, each part in ring order. Every
// engine holds the prefixes of its sessions in a cache of the same size:
// an engine given more than its share evicts them, one given less leaves
// its cache idle, so new sessions fill the engines evenly, each starting
// from its own place on the ring. Sessions are weighed by the size of
// their latest request, not counted: a one-off request (a health check, a
// title) weighs next to nothing beside an agent session's long prefix.
func (c *Client) fewestSessions(order []*engine, size int64) []*engine {
	least := int64(-1)
	held := c.sessions.holdings(len(c.engines))
	for _, e := range c.engines {
		if e.up.Load() {
			if least < 0 || held[e.index] < least {
				least = held[e.index]
			}
		}
	}
	if least < 0 {
		return order
	}
	under := make([]*engine, 0, len(order))
	var over []*engine
	for _, e := range order {
		if 2*(held[e.index]-least) < size {
			under = append(under, e)
		} else {
			over = append(over, e)
		}
	}
	return append(under, over...)
}

// rotated returns the engines starting at the i-th.
func (c *Client) rotated(i int) []*engine {
	out := make([]*engine, 0, len(c.engines))
	out = append(out, c.engines[i:]...)
	return append(out, c.engines[:i]...)
}

// leastBusy returns the healthy engine of order with the fewest requests
// in flight (the first of those tied), or order's first when none is
// healthy.
func (c *Client) leastBusy(order []*engine) *engine {
	var best *engine
	for _, e := range order {
		if e.up.Load() && (best == nil || e.inFlight.Load() < best.inFlight.Load()) {
			best = e
		}
	}
	if best == nil {
		return order[0]
	}
	return best
}

// underBound returns the first healthy engine of order under the load
// bound: fewer requests in flight than loadFactor times the healthy
// engines' average, counting this one (Mirrokni, Thorup and
// Zadimoghaddam's ceil(c(m+1)/n)). Else the first healthy one, else
// order's first.
func (c *Client) underBound(order []*engine) *engine {
	bound, ok := c.bound()
	if !ok {
		return order[0]
	}
	var first *engine
	for _, e := range order {
		if !e.up.Load() {
			continue
		}
		if e.inFlight.Load() < bound {
			return e
		}
		if first == nil {
			first = e
		}
	}
	return first
}

// bound is the load bound: loadFactor times the healthy engines' average
// count of requests in flight, counting the one being placed
// (Mirrokni, Thorup and Zadimoghaddam's ceil(c(m+1)/n)). ok is false
// when no engine is healthy.
func (c *Client) bound() (bound int64, ok bool) {
	var total int64
	healthy := 0
	for _, e := range c.engines {
		if e.up.Load() {
			total += e.inFlight.Load()
			healthy++
		}
	}
	if healthy == 0 {
		return 0, false
	}
	return int64(math.Ceil(loadFactor * float64(total+1) / float64(healthy))), true
}

// enter puts the request on e.
func (p *placement) enter(e *engine) {
	p.at = e
	n := e.inFlight.Add(1)
	if p.c.observer != nil {
		p.c.observer.EngineInFlight(e.name, int(n))
	}
}

// leave takes the request off its engine.
func (p *placement) leave() {
	n := p.at.inFlight.Add(-1)
	if p.c.observer != nil {
		p.c.observer.EngineInFlight(p.at.name, int(n))
	}
}

// failover moves the request to the next healthy engine of its order,
// if there is one.
func (p *placement) failover() {
	k := slices.Index(p.order, p.at)
	for j := 1; j < len(p.order); j++ {
		if e := p.order[(k+j)%len(p.order)]; e.up.Load() {
			p.leave()
			p.enter(e)
			return
		}
	}
}

// send is the retry loop's sender (httpretry.Policy.Do): it sends each
// attempt to the request's engine and judges the engine by the answer.
// The first retry (the attempt before failed before its first byte: a
// refused connection, a 429 or 5xx) goes to the next healthy engine, and
// the ones after it stay there: a request fails over once.
func (p *placement) send(req *http.Request) (*http.Response, error) {
	if p.sent == 1 {
		p.failover()
	}
	p.sent++
	e := p.at
	if e.url == nil {
		return nil, errBadURL
	}
	if req.URL != e.url {
		req = p.c.retarget(req, e)
	}
	if p.c.observer != nil {
		p.c.observer.EngineRequest(e.name)
	}
	resp, err := p.c.httpDo(req)
	switch {
	case err != nil:
		if req.Context().Err() == nil {
			p.c.failed(e, err)
		}
	case resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented:
		if e.errors5xx.Add(1) >= ejectAfter5xx {
			p.c.failed(e, fmt.Errorf("status %d, %d in a row", resp.StatusCode, ejectAfter5xx))
		}
	default:
		e.errors5xx.Store(0)
		p.c.answered(e)
	}
	return resp, err
}

// retarget returns req sent to e instead: its URL and credentials.
func (c *Client) retarget(req *http.Request, e *engine) *http.Request {
	next := *req
	next.URL, next.Host = e.url, e.url.Host
	next.Header = req.Header.Clone()
	if e.auth != nil {
		next.Header["Authorization"] = e.auth
	} else {
		delete(next.Header, "Authorization")
	}
	return &next
}

// failed takes e out after a failure that says it is down or broken (a
// connection refused or reset, a 5xx), and starts probing it.
func (c *Client) failed(e *engine, cause error) {
	if !c.track {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.up.Load() {
		e.up.Store(false)
		c.log.Warn("upstream engine taken out", "api", c.name, "engine", e.name, "err", c.redact(cause.Error()))
		if c.observer != nil {
			c.observer.EngineHealth(e.name, false)
		}
	}
	if !e.probing && e.models != nil && c.startProbe(e) {
		e.probing = true
	}
}

// startProbe starts probing e unless the client is closed, and reports
// whether it did. The probe's Add happens before Close's Wait.
func (c *Client) startProbe(e *engine) bool {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	if c.closed {
		return false
	}
	c.probes.Add(1)
	go c.probe(e)
	return true
}

// answered takes e back after it answered (anything but a 5xx).
func (c *Client) answered(e *engine) {
	if !c.track || e.up.Load() {
		return
	}
	c.back(e, "answered")
}

// back takes e back, if it is out.
func (c *Client) back(e *engine, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.up.Load() {
		e.up.Store(true)
		c.log.Info("upstream engine back", "api", c.name, "engine", e.name, "after", why)
		if c.observer != nil {
			c.observer.EngineHealth(e.name, true)
		}
	}
}

// probe checks e, taken out, after a wait that doubles each time it
// fails, until it answers (then e is back) or e is back already, or the
// client is closed.
func (c *Client) probe(e *engine) {
	defer c.probes.Done()
	wait := c.probeInterval
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-c.life.Done():
			e.mu.Lock()
			e.probing = false
			e.mu.Unlock()
			return
		case <-timer.C:
		}
		if c.check(c.life, e) == nil {
			c.back(e, "probe")
		}
		e.mu.Lock()
		if e.up.Load() {
			e.probing = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		wait = min(2*wait, model.MaxProbeInterval)
		timer.Reset(wait)
	}
}

// errNoProbe is the check of an engine that cannot be probed.
var errNoProbe = errors.New("the engine's URL does not parse")

// check asks e for its models (GET <base>/models, with the key): nil
// when it answers 200.
func (c *Client) check(ctx context.Context, e *engine) error {
	if e.models == nil {
		return errNoProbe
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	h := make(http.Header, 2)
	h["Accept"] = headerJSON
	if e.auth != nil {
		h["Authorization"] = e.auth
	}
	req := (&http.Request{Method: http.MethodGet, URL: e.models, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Host: e.models.Host}).WithContext(ctx)
	resp, err := c.httpDo(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /models answered %d", resp.StatusCode)
	}
	return nil
}

// Check asks every engine for its models, at once, and returns those
// that did not answer 200, in the order they were given; they are taken
// out (and probed until they answer), the others taken back.
func (c *Client) Check(ctx context.Context) []model.EngineDown {
	errs := make([]error, len(c.engines))
	var wg sync.WaitGroup
	for i, e := range c.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.check(ctx, e)
		}()
	}
	wg.Wait()
	var down []model.EngineDown
	for i, e := range c.engines {
		if errs[i] != nil {
			down = append(down, model.EngineDown{Engine: e.name, Err: errors.New(c.redact(errs[i].Error()))})
			c.failed(e, errs[i])
		} else {
			c.answered(e)
		}
	}
	return down
}

// Ready reports whether an engine is healthy.
func (c *Client) Ready() bool {
	for _, e := range c.engines {
		if e.up.Load() {
			return true
		}
	}
	return false
}

// Close stops probing the engines that are out and waits for the probes
// to end; the client still sends. It may be called more than once.
func (c *Client) Close() {
	c.probeMu.Lock()
	c.closed = true
	c.probeMu.Unlock()
	c.stop()
	c.probes.Wait()
}

// cacheSalt is tenant's cache_salt: HMAC-SHA256 of the tenant under the
// configured secret, in hex.
func (c *Client) cacheSaltOf(tenant string) string {
	mac := hmac.New(sha256.New, c.cacheSalt)
	mac.Write([]byte(tenant))
	return hex.EncodeToString(mac.Sum(nil))
}
