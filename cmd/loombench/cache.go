package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomgate/loom/internal/loadgen"
	"github.com/loomgate/loom/model/mockllm"
)

// "loombench cache" measures how much of agent sessions' prompts a fleet
// of engines serves from its prefix caches, depending on how loom reaches
// the engines. Every engine is the scripted upstream simulating a prefix
// cache (mockllm.PrefixCacheOptions: 16-token blocks hashed by their
// prefix chain, LRU; chat prompts tokenised with o200k, each message and
// tool on its own) and a prefill cost per token it misses, waited before
// its first byte, so that time to first token follows the misses.
//
// The workload (cacheload.go) is -sessions agent sessions of -turns
// turns, side by side, each turn a tool call and its output of
// -output-words words, with long instructions of each session's own and 8
// tools; in two styles: chain (previous_response_id, store true) and
// resend (the whole history, store false, prompt_cache_key). Each style
// runs every arm with fresh processes (cold caches, an empty store):
//
//   - ideal: loom over one engine that never evicts. That is the fleet's
//     total cache: each engine of the other arms holds a quarter (1/-engines)
//     of the working set, which is measured here, from this arm, as the
//     full blocks of each session's last prompt (a session's prompts each
//     begin with the one before, see integration/prefix_test.go);
//   - haproxy: loom with one --upstream-url, HAProxy balancing round robin
//     over -engines engines;
//   - fleet: loom given the engines' URLs (--upstream-url u1,u2,...);
//   - fleet, one killed: the same, one engine killed (SIGKILL) once a
//     third of the turns are done;
//   - ideal, one lost: loom over one engine holding the fleet's total
//     cache as (a) does, which shrinks to the survivors' total
//     ((engines-1) engines' worth) at the moment (d) kills its engine.
//     It is the ideal of (d): the one engine that always holds what the
//     fleet of (d) holds, with no routing to get wrong. Once one engine
//     is gone the sessions' late turns need more cache than is left, and
//     an LRU cache visited by sessions in turn evicts each one's prefix
//     before its next turn, whatever sends the requests there: (d)'s
//     ratio to (e) is what loom's routing is answerable for.
//
// The sessions start together (a burst, the harder case for placement by
// load) or -stagger apart. Each engine counts the requests of each session
// (named in its instructions), so the report also says how many sessions
// more than one engine served: a session that moves loses its prefix.
//
// An arm whose loom does not take the list (it does not start, or a
// first request through it fails) is reported "not available". The
// report gives per arm the share of prompt tokens served from cache, its
// ratio to the ideal's, the failed requests and the time to first token
// (to the first output item of the stream) at p50 and p99.

// cacheConfig is what the cache benchmark's flags set.
type cacheConfig struct {
	workload
	engines         int
	blockTokens     int
	prefillPerToken time.Duration
	chunkPause      time.Duration
	styles          []cacheStyle
	arms            []string
	budget          time.Duration
	workDir         string
	loomSource      string
}

// The arms.
const (
	armIdeal     = "ideal"
	armHAProxy   = "haproxy"
	armFleet     = "fleet"
	armFleetKill = "fleet-kill"
	armReduced   = "reduced"
)

var allArms = []string{armIdeal, armHAProxy, armFleet, armFleetKill, armReduced}

// armLabel is how the report names an arm.
var armLabel = map[string]string{
	armIdeal:     "(a) one engine with the fleet's total cache (ideal)",
	armHAProxy:   "(b) loom -> HAProxy round robin -> engines",
	armFleet:     "(c) loom given the engines' URLs",
	armFleetKill: "(d) as (c), one engine killed at 1/3",
	armReduced:   "(e) as (a), its cache cut to what (d) keeps when (d) loses its engine",
}

func parseCacheFlags(args []string) (*cacheConfig, error) {
	c := &cacheConfig{}
	fs := flag.NewFlagSet("loombench cache", flag.ContinueOnError)
	fs.IntVar(&c.sessions, "sessions", 24, "agent sessions, side by side")
	fs.IntVar(&c.turns, "turns", 8, "turns per session, each a tool call and its output")
	fs.IntVar(&c.concurrent, "concurrent", 0, "sessions running at once, the others starting as those end (0: all, interleaved)")
	fs.DurationVar(&c.stagger, "stagger", 0, "pause between two sessions' starts (0: all start at once, a burst)")
	fs.IntVar(&c.instructionWords, "instruction-words", 1200, "words of each session's instructions")
	fs.IntVar(&c.outputWords, "output-words", 250, "words of each tool output")
	fs.IntVar(&c.engines, "engines", 4, "engines of the fleet; each holds 1/engines of the working set")
	fs.IntVar(&c.blockTokens, "block-tokens", 16, "tokens per cache block")
	fs.DurationVar(&c.prefillPerToken, "prefill-per-token", 40*time.Microsecond, "an engine's prefill time per token it does not find in its cache")
	fs.DurationVar(&c.chunkPause, "chunk-pause", 2*time.Millisecond, "pause between two chunks of an engine's answer")
	styles := fs.String("styles", "chain,resend", "styles to run: chain (previous_response_id, store true), resend (whole history, store false)")
	arms := fs.String("arms", strings.Join(allArms, ","), "arms to run (the ideal always runs: it sizes the others' caches; fleet-kill brings reduced, its ideal)")
	fs.DurationVar(&c.budget, "budget", 9*time.Minute, "the longest the run may take: arms that would start past it are skipped")
	fs.StringVar(&c.loomSource, "loom-src", "", "build the loom measured from this checkout of the repository (empty: the current one)")
	fs.StringVar(&c.workDir, "workdir", "", "directory for the binaries, stores and logs (empty: a temporary one, removed after)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for s := range strings.SplitSeq(*styles, ",") {
		switch st := cacheStyle(strings.TrimSpace(s)); st {
		case styleChain, styleResend:
			c.styles = append(c.styles, st)
		default:
			return nil, fmt.Errorf("-styles: unknown style %q", s)
		}
	}
	c.arms = []string{armIdeal}
	for a := range strings.SplitSeq(*arms, ",") {
		a = strings.TrimSpace(a)
		if !slices.Contains(allArms, a) {
			return nil, fmt.Errorf("-arms: unknown arm %q (want %s)", a, strings.Join(allArms, ", "))
		}
		if !slices.Contains(c.arms, a) {
			c.arms = append(c.arms, a)
		}
	}
	if slices.Contains(c.arms, armFleetKill) && !slices.Contains(c.arms, armReduced) {
		// (d) is judged against (e).
		c.arms = append(c.arms, armReduced)
	}
	switch {
	case c.sessions < 1, c.turns < 1, c.outputWords < 1, c.instructionWords < 1:
		return nil, errors.New("-sessions, -turns, -output-words and -instruction-words must be at least 1")
	case c.concurrent < 0, c.stagger < 0:
		return nil, errors.New("-concurrent and -stagger must not be negative")
	case c.engines < 2:
		return nil, errors.New("-engines must be at least 2")
	case c.blockTokens < 1:
		return nil, errors.New("-block-tokens must be at least 1")
	}
	return c, nil
}

// armOutcome is one arm of one style, as reported.
type armOutcome struct {
	style cacheStyle
	arm   string
	res   *armResult
	// unavailable says why the arm did not run ("" when it did).
	unavailable string
	// engineRequests are the requests each engine served ("killed" for
	// the one killed).
	engineRequests []string
	// split counts the sessions that more than one engine served (the
	// killed engine's requests unknown).
	split int

	capacity int // blocks per engine; 0: no limit
}

// runCache runs the cache benchmark and writes its report to out.
func runCache(ctx context.Context, args []string, out io.Writer) (err error) {
	cfg, err := parseCacheFlags(args)
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(cfg.budget)
	dir := cfg.workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "loombench-cache-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	progress("building loom")
	loomBin, err := buildLoom(ctx, dir, cfg.loomSource)
	if err != nil {
		return err
	}
	var outcomes []armOutcome
	var armTime time.Duration
	for _, style := range cfg.styles {
		workingSet := 0
		for _, arm := range cfg.arms {
			o := armOutcome{style: style, arm: arm}
			if arm == armFleetKill && slices.ContainsFunc(outcomes, func(p armOutcome) bool {
				return p.style == style && p.arm == armFleet && strings.HasPrefix(p.unavailable, "not available")
			}) {
				o.unavailable = "not available, as (c)"
				outcomes = append(outcomes, o)
				continue
			}
			if arm != armIdeal && workingSet == 0 {
				o.unavailable = "skipped: the ideal arm measured no working set"
				outcomes = append(outcomes, o)
				continue
			}
			if arm != armIdeal && time.Now().Add(armTime).After(deadline) {
				o.unavailable = fmt.Sprintf("skipped: it would end past the budget (%s)", cfg.budget)
				outcomes = append(outcomes, o)
				continue
			}
			switch arm {
			case armIdeal:
			case armReduced:
				// The fleet's total at first, cut at the kill.
				o.capacity = max(1, workingSet/cfg.engines) * cfg.engines
			default:
				o.capacity = max(1, workingSet/cfg.engines)
			}
			progress("%s: %s", style, armLabel[arm])
			begin := time.Now()
			if err := runArm(ctx, cfg, dir, loomBin, &o); err != nil {
				return fmt.Errorf("%s, %s: %w", style, arm, err)
			}
			armTime = max(armTime, time.Since(begin))
			if arm == armIdeal {
				for _, n := range o.res.lastPrompt {
					workingSet += n / cfg.blockTokens
				}
			}
			outcomes = append(outcomes, o)
		}
	}
	return writeCacheReport(out, cfg, outcomes, time.Since(start))
}

// runArm starts the arm's engines, balancer and loom, runs the sessions
// through loom and stops them all.
func runArm(ctx context.Context, cfg *cacheConfig, dir, loomBin string, o *armOutcome) (err error) {
	armDir := filepath.Join(dir, string(o.style)+"-"+o.arm)
	if err := os.MkdirAll(armDir, 0o755); err != nil {
		return err
	}
	var started []*server
	defer func() {
		for _, s := range slices.Backward(started) {
			s.stop()
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	n := cfg.engines
	if o.arm == armIdeal || o.arm == armReduced {
		n = 1
	}
	var engines []*server
	for i := range n {
		e, err := startServer(ctx, fmt.Sprintf("engine%d", i), armDir, self, func(addr string) []string {
			return []string{"engine", "-addr", addr, "-capacity-blocks", fmt.Sprint(o.capacity),
				"-block-tokens", fmt.Sprint(cfg.blockTokens), "-prefill-per-token", cfg.prefillPerToken.String(),
				"-chunk-pause", cfg.chunkPause.String()}
		}, "/v1/models")
		if err != nil {
			return err
		}
		started = append(started, e)
		engines = append(engines, e)
	}
	var upstream string
	switch o.arm {
	case armIdeal, armReduced:
		upstream = engines[0].url + "/v1"
	case armHAProxy:
		var urls []string
		for _, e := range engines {
			urls = append(urls, e.url)
		}
		lb, err := startRoundRobin(ctx, armDir, urls)
		if err != nil {
			return err
		}
		started = append(started, lb)
		upstream = lb.url + "/v1"
	default:
		var urls []string
		for _, e := range engines {
			urls = append(urls, e.url+"/v1")
		}
		upstream = strings.Join(urls, ",")
	}
	fleet := o.arm == armFleet || o.arm == armFleetKill
	loom, err := startServer(ctx, "loom", armDir, loomBin, func(addr string) []string {
		return []string{"serve", "--addr", addr, "--upstream-url", upstream,
			"--store", filepath.Join(armDir, "loom.db"), "--model", mockllm.DefaultModel, "--drain-delay", "0"}
	}, "/readyz")
	if err != nil {
		if fleet {
			o.unavailable = "not available: loom given the URLs did not start: " + firstLine(err.Error())
			return nil
		}
		return err
	}
	started = append(started, loom)
	client := &http.Client{Transport: loadgen.PooledTransport(2 * cfg.sessions)}
	if err := probe(ctx, client, loom.url); err != nil {
		if fleet {
			o.unavailable = "not available: loom given the URLs failed a first request: " + firstLine(err.Error())
			return nil
		}
		return err
	}

	// What the engines served before the sessions (the probe) is not
	// theirs.
	before := make([]int, len(engines))
	for i, e := range engines {
		st, err := engineStats(ctx, e)
		if err != nil {
			return err
		}
		before[i] = st.Cache.Requests
	}

	r := &sessionRunner{w: &cfg.workload, style: o.style, url: loom.url, client: client}
	killed := -1
	killAt := cfg.sessions * cfg.turns / 3
	var once sync.Once
	switch o.arm {
	case armFleetKill:
		r.afterTurn = func(done int) {
			if done >= killAt {
				once.Do(func() {
					killed = 0
					progress("killing engine0 after %d turns", done)
					_ = engines[0].cmd.Process.Kill()
				})
			}
		}
	case armReduced:
		kept := o.capacity / cfg.engines * (cfg.engines - 1)
		r.afterTurn = func(done int) {
			if done >= killAt {
				once.Do(func() {
					progress("cutting the engine's cache to %d blocks after %d turns", kept, done)
					if err := setCapacity(ctx, engines[0], kept); err != nil {
						r.fail(fmt.Sprintf("cutting the cache: %v", err))
					}
				})
			}
		}
	}
	o.res = r.run(ctx)
	servedBy := map[int]int{} // session: engines that served it
	for i, e := range engines {
		if i == killed {
			o.engineRequests = append(o.engineRequests, "killed")
			continue
		}
		st, err := engineStats(ctx, e)
		if err != nil {
			return err
		}
		o.engineRequests = append(o.engineRequests, fmt.Sprint(st.Cache.Requests-before[i]))
		for s := range st.Sessions {
			servedBy[s]++
		}
	}
	for _, n := range servedBy {
		if n > 1 {
			o.split++
		}
	}
	return ctx.Err()
}

// probe sends one small request through loom: it must complete.
func probe(ctx context.Context, client *http.Client, loomURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body := fmt.Appendf(nil, `{"model":%q,"store":false,"input":"#say ready"}`, mockllm.DefaultModel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, loomURL+"/v1/responses", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Status != "completed" {
		return fmt.Errorf("status %d: %.160s", resp.StatusCode, b)
	}
	return nil
}

// setCapacity changes an engine's cache capacity (loombench engine's POST
// /cache/capacity).
func setCapacity(ctx context.Context, e *server, blocks int) error {
	return send(ctx, http.MethodPost, fmt.Sprintf("%s/cache/capacity?blocks=%d", e.url, blocks), 10*time.Second)
}

// engineStats reads what an engine says of itself.
func engineStats(ctx context.Context, e *server) (engineReport, error) {
	var st engineReport
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/cache/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("%s: %w", e.name, err)
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// writeCacheReport writes the parameters and one row per style and arm,
// in markdown.
func writeCacheReport(w io.Writer, cfg *cacheConfig, outcomes []armOutcome, took time.Duration) error {
	var b strings.Builder
	loomAt := commit()
	if cfg.loomSource != "" {
		loomAt = fmt.Sprintf("%s (loom built from %s at %s)", loomAt, cfg.loomSource, commitIn(cfg.loomSource))
	}
	fmt.Fprintf(&b, "Commit %s, %s; %s; the run took %s.\n\n", loomAt, time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), took.Round(time.Second))
	running := "all at once"
	if cfg.concurrent > 0 && cfg.concurrent < cfg.sessions {
		running = fmt.Sprintf("%d at a time", cfg.concurrent)
	}
	if cfg.stagger > 0 {
		running += fmt.Sprintf(", starting %s apart", cfg.stagger)
	} else {
		running += ", starting together"
	}
	fmt.Fprintf(&b, "%d sessions x %d turns, %s (a tool call and an output of %d words each; %d words of instructions per session; %d tools); "+
		"engines: %d-token blocks, LRU, prefill %s per uncached token, answers streamed %s a chunk; chat completions, o200k tokens.\n\n",
		cfg.sessions, cfg.turns, running, cfg.outputWords, cfg.instructionWords, len(toolNames), cfg.blockTokens, cfg.prefillPerToken, cfg.chunkPause)
	b.WriteString("| Style | Arm | Engine cache (blocks) | Requests (per engine) | Sessions on several engines | Failed | Prompt tokens | From cache | x ideal | TTFT p50 | TTFT p99 | Target | Met? |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	ideal := map[cacheStyle]float64{}
	lostIdeal := map[cacheStyle]float64{} // (e), the ideal of (d)
	for _, o := range outcomes {
		if o.res == nil {
			continue
		}
		switch o.arm {
		case armIdeal:
			ideal[o.style] = o.res.share()
		case armReduced:
			lostIdeal[o.style] = o.res.share()
		}
	}
	for _, o := range outcomes {
		target := map[string]string{armFleet: ">= 0.95x, 0 failed",
			armFleetKill: ">= 0.8x (e), the ideal with the same loss; 0 failed but streams in flight on the killed engine"}[o.arm]
		if o.unavailable != "" {
			fmt.Fprintf(&b, "| %s | %s | | | | | | | | | | %s | %s |\n", o.style, armLabel[o.arm], target, o.unavailable)
			continue
		}
		r := o.res
		capacity := "no limit"
		if o.capacity > 0 {
			capacity = fmt.Sprint(o.capacity)
		}
		ratio, ratioText := 0.0, "—"
		if v := ideal[o.style]; v > 0 {
			ratio = r.share() / v
			ratioText = fmt.Sprintf("%.2f", ratio)
		}
		lostRatio := 0.0
		if v := lostIdeal[o.style]; o.arm == armFleetKill && v > 0 {
			lostRatio = r.share() / v
			ratioText += fmt.Sprintf(" (%.2f x (e))", lostRatio)
		}
		failed := fmt.Sprint(r.failed)
		if r.cut > 0 {
			failed += fmt.Sprintf(" (%d cut in flight)", r.cut)
		}
		if r.abandoned > 0 {
			failed += fmt.Sprintf(" (%d turns not run)", r.abandoned)
		}
		p50, p99 := "—", "—"
		if len(r.ttfts) > 0 {
			slices.Sort(r.ttfts)
			p50 = fmt.Sprintf("%.0f ms", ms(percentile(r.ttfts, 50)))
			p99 = fmt.Sprintf("%.0f ms", ms(percentile(r.ttfts, 99)))
		}
		ok := ""
		switch o.arm {
		case armFleet:
			ok = met(ratio >= 0.95 && r.failed == 0 && r.abandoned == 0)
		case armFleetKill:
			// A stream in flight on the engine killed fails, as with one
			// engine; every other request must not.
			ok = met(lostRatio >= 0.8 && r.failed == r.cut && r.abandoned == 0)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d (%s) | %d | %s | %d | %.2f | %s | %s | %s | %s | %s |\n",
			o.style, armLabel[o.arm], capacity, r.requests, strings.Join(o.engineRequests, "/"), o.split, failed,
			r.prompt, r.share(), ratioText, p50, p99, target, ok)
	}
	for _, o := range outcomes {
		if o.res != nil && len(o.res.errors) > 0 {
			fmt.Fprintf(&b, "\n%s, %s: first failures:\n", o.style, o.arm)
			for _, e := range o.res.errors {
				fmt.Fprintf(&b, "- %s\n", e)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
