package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomgate/loom/internal/loadgen"
)

// measures is what one round measured, by key (see the *Key functions).
type measures map[string]float64

// The kinds of answer at the pace.
const (
	streamed = "streamed"
	whole    = "JSON"
)

// e2eKey: the end-to-end time of target's requests at the pace, in ms,
// at percentile p ("p50", "p99").
func e2eKey(kind, p, target string) string { return "e2e/" + kind + "/" + p + "/" + target }

// cpuKey: the process CPU of server per request at the pace, in µs,
// less what it uses with no request (idleCPUKey).
func cpuKey(kind, server string) string { return "cpu/" + kind + "/" + server }

// cpuAllKey: the same with what it uses with no request.
func cpuAllKey(kind, server string) string { return "cpuall/" + kind + "/" + server }

// idleCPUKey: the process CPU of server with no request, before the
// phase at the pace of kind, in ms per second.
func idleCPUKey(kind, server string) string { return "idlecpu/" + kind + "/" + server }

// idleKey: the memory of server per idle open stream, in bytes.
func idleKey(server string) string { return "idle/" + server }

// payloadKey: the p50 end-to-end time of target's requests carrying
// payload, in ms.
func payloadKey(payload, target string) string { return "payload/" + payload + "/" + target }

// toolsKey: loom's CPU per request of n tools, in ms (the median).
func toolsKey(n int) string { return fmt.Sprintf("tools/%d", n) }

// The payloads of the request-size rows.
const (
	messagesPayload = "1000 messages"
	toolsPayload    = "100 tools"
)

func measureRound(ctx context.Context, cfg *config, f *fleet, round int, deadline time.Time) (measures, error) {
	m := measures{}
	for _, kind := range []string{streamed, whole} {
		if err := measurePace(ctx, cfg, f, m, kind, round == 1 && cfg.profileDir != "", phaseDeadline(cfg.paceTime, deadline)); err != nil {
			return nil, err
		}
	}
	if err := measureIdle(ctx, cfg, f, m); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name            string
		messages, tools int
	}{{messagesPayload, 1000, 0}, {toolsPayload, 0, 100}} {
		if err := measurePayload(ctx, cfg, f, m, p.name, p.messages, p.tools, phaseDeadline(cfg.payloadTime, deadline)); err != nil {
			return nil, err
		}
	}
	if err := measureTools(ctx, cfg, f, m); err != nil {
		return nil, err
	}
	return m, nil
}

// phaseDeadline is when a phase stops: after d, or at the run's deadline.
func phaseDeadline(d time.Duration, deadline time.Time) time.Time {
	end := time.Now().Add(d)
	if deadline.Before(end) {
		return deadline
	}
	return end
}

// percentile is the p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func totals(ts []loadgen.Timing) []time.Duration {
	d := make([]time.Duration, len(ts))
	for i, t := range ts {
		d[i] = t.Total
	}
	slices.Sort(d)
	return d
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// measurePace sends the same paced answer, streamed or JSON, straight to
// the upstream, through the proxy and through each loom, side by side,
// and notes each target's end-to-end p50 and p99 and each server's CPU
// per request. With profile, the store-true looms are profiled.
func measurePace(ctx context.Context, cfg *config, f *fleet, m measures, kind string, profile bool, until time.Time) error {
	stream := kind == streamed
	script := paceScript(cfg.chunks, cfg.chunkPause)
	chat := chatBody(stream, script)
	targets := []loadgen.Target{
		{Name: direct, URL: f.upstream.url + "/v1/chat/completions", Body: chat},
		{Name: proxy, URL: f.proxy.url + "/v1/chat/completions", Body: chat},
	}
	servers := map[string]*server{proxy: f.proxy}
	for _, name := range looms {
		if s := f.loom[name]; s != nil {
			targets = append(targets, loadgen.Target{Name: name, URL: s.url + "/v1/responses", Body: responsesBody(stream, stores(name), script)})
			servers[name] = s
		}
	}
	clients := cfg.clients
	client := &http.Client{Transport: loadgen.PooledTransport(clients)}
	defer client.CloseIdleConnections()

	// What each server uses with no request at all (loom's background
	// jobs poll their store) is not the requests': it is measured before
	// and after the phase, and the mean rate taken out of its CPU.
	idleBefore, err := idleCPU(ctx, servers, idleWindow)
	if err != nil {
		return err
	}
	// With profile, the store-true looms are profiled while the phase
	// runs.
	var profiled []*server
	if profile {
		for _, name := range looms {
			if s := f.loom[name]; s != nil && stores(name) {
				profiled = append(profiled, s)
			}
		}
	}
	before := map[string]time.Duration{}
	var began time.Time
	var measureErr error
	measuring := func() {
		for name, s := range servers {
			c, err := s.cpu(ctx)
			measureErr = errors.Join(measureErr, err)
			before[name] = c
		}
		began = time.Now()
		for _, s := range profiled {
			measureErr = errors.Join(measureErr, s.startProfile(ctx))
		}
	}
	res, err := loadgen.Run(ctx, targets, loadgen.Options{
		Clients: clients, Rounds: cfg.paceRequests, Client: client, Measuring: measuring, Deadline: until,
	})
	if err != nil {
		return fmt.Errorf("%s at the pace: %w", kind, err)
	}
	elapsed := time.Since(began)
	after := map[string]time.Duration{}
	for name, s := range servers {
		if after[name], err = s.cpu(ctx); err != nil {
			return err
		}
	}
	for _, s := range profiled {
		file := filepath.Join(cfg.profileDir, fmt.Sprintf("%s-%s.pprof", s.name, strings.ToLower(kind)))
		measureErr = errors.Join(measureErr, s.stopProfile(ctx, file))
	}
	if measureErr != nil {
		return measureErr
	}
	idleAfter, err := idleCPU(ctx, servers, idleWindow)
	if err != nil {
		return err
	}
	n := len(res[0])
	if n == 0 {
		progress("%s at the pace: no time left", kind)
		return nil
	}
	line := fmt.Sprintf("%s at the pace, %d requests per target:", kind, n)
	if stream {
		line += fmt.Sprintf(" %d chunks upstream;", res[0][0].Lines-1) // and [DONE]
	}
	for ti, t := range targets {
		d := totals(res[ti])
		m[e2eKey(kind, "p50", t.Name)] = ms(percentile(d, 50))
		m[e2eKey(kind, "p99", t.Name)] = ms(percentile(d, 99))
		line += fmt.Sprintf(" %s %.1f/%.1f ms", t.Name, ms(percentile(d, 50)), ms(percentile(d, 99)))
		if servers[t.Name] != nil {
			idle := (idleBefore[t.Name] + idleAfter[t.Name]) / 2
			used := after[t.Name] - before[t.Name]
			background := time.Duration(idle * float64(elapsed))
			requests := float64(len(res[ti]))
			m[cpuKey(kind, t.Name)] = float64(used-background) / float64(time.Microsecond) / requests
			m[cpuAllKey(kind, t.Name)] = float64(used) / float64(time.Microsecond) / requests
			m[idleCPUKey(kind, t.Name)] = idle * 1000
			line += fmt.Sprintf(" (cpu %.0f µs, %.0f with idle %.1f ms/s)", m[cpuKey(kind, t.Name)], m[cpuAllKey(kind, t.Name)], idle*1000)
		}
		line += ","
	}
	progress("%s", strings.TrimSuffix(line, ","))
	return nil
}

// streamTarget is one way to open a stream that the upstream stalls after
// the first piece of its answer.
type streamTarget struct {
	url  string
	body []byte
	// reached reports whether the n-th data line (from 1) is the one
	// after which the upstream stalls.
	reached func(line string, n int) bool
}

// idleScript answers a few words, then stalls after the first piece of
// text (the second chunk) until the client goes away.
const idleScript = "#say Idle streams should cost little memory while they wait.\n#stall 2"

// measureIdle notes the memory per idle open stream of loom (store true,
// SQLite) and of the proxy.
func measureIdle(ctx context.Context, cfg *config, f *fleet, m measures) error {
	for _, c := range []struct {
		s *server
		t streamTarget
	}{
		{f.loom[loomSQLite], streamTarget{
			url:  f.loom[loomSQLite].url + "/v1/responses",
			body: responsesBody(true, true, idleScript),
			// loom's first text delta.
			reached: func(line string, _ int) bool { return strings.Contains(line, `"type":"response.output_text.delta"`) },
		}},
		{f.proxy, streamTarget{
			url:  f.proxy.url + "/v1/chat/completions",
			body: chatBody(true, idleScript),
			// The upstream's second chunk is its first piece of text.
			reached: func(_ string, n int) bool { return n == 2 },
		}},
	} {
		perStream, err := idleMemory(ctx, c.s, c.t, cfg.idleStreams)
		if err != nil {
			return err
		}
		m[idleKey(c.s.name)] = perStream
		progress("%d idle streams: %s %.1f KB each", cfg.idleStreams, c.s.name, perStream/1024)
	}
	return nil
}

// idleMemory opens n streams through s, each read up to the upstream's
// stall, and returns s's heap and stacks with them all open minus before,
// per stream.
func idleMemory(ctx context.Context, s *server, t streamTarget, n int) (float64, error) {
	if err := settleGoroutines(ctx, s); err != nil {
		return 0, err
	}
	before, err := s.memory(ctx)
	if err != nil {
		return 0, err
	}
	baseline, err := s.goroutines(ctx)
	if err != nil {
		return 0, err
	}
	// One connection per stream, closed with it.
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	streams := make([]*http.Response, n)
	closeAll := func() {
		for _, r := range streams {
			if r != nil {
				r.Body.Close()
			}
		}
	}
	defer closeAll()
	var (
		mu    sync.Mutex
		first error
		next  = make(chan int)
		wg    sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				r, err := openStream(ctx, client, t)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
				streams[i] = r
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		return 0, fmt.Errorf("%s: idle stream: %w", s.name, first)
	}
	// Every stream has its first text; the servers' last writes and
	// reads end before the sample.
	if err := settleGoroutines(ctx, s); err != nil {
		return 0, err
	}
	open, err := s.memory(ctx)
	if err != nil {
		return 0, err
	}
	closeAll()
	clear(streams)
	// The streams' goroutines end before the next phase; bounded.
	for range 200 {
		g, err := s.goroutines(ctx)
		if err != nil {
			return 0, err
		}
		if g <= baseline {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	grown := open.heapInuse + open.stackInuse - before.heapInuse - before.stackInuse
	return float64(grown) / float64(n), nil
}

// openStream starts one stream and reads it up to the upstream's stall;
// the stream stays open in the response returned.
func openStream(ctx context.Context, client *http.Client, t streamTarget) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(string(t.body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	r := bufio.NewReader(resp.Body)
	n := 0
	for range 1000 {
		line, err := r.ReadString('\n')
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("the stream ended before the stall: %w", err)
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		n++
		if t.reached(line, n) {
			return resp, nil
		}
	}
	resp.Body.Close()
	return nil, errors.New("no stall in 1000 lines")
}

// settleGoroutines waits until s's goroutine count stops moving (the same
// in 5 samples 50 ms apart), for at most 5 s.
func settleGoroutines(ctx context.Context, s *server) error {
	last, same := -1, 0
	for range 100 {
		g, err := s.goroutines(ctx)
		if err != nil {
			return err
		}
		if g == last {
			if same++; same == 5 {
				return nil
			}
		} else {
			last, same = g, 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// measurePayload sends the same payload straight to the upstream, through
// the proxy and through each loom, one request at a time, and notes each
// target's p50 end-to-end time.
func measurePayload(ctx context.Context, cfg *config, f *fleet, m measures, payload string, messages, tools int, until time.Time) error {
	chat, _ := payloadBodies(messages, tools, false)
	targets := []loadgen.Target{
		{Name: direct, URL: f.upstream.url + "/v1/chat/completions", Body: chat},
		{Name: proxy, URL: f.proxy.url + "/v1/chat/completions", Body: chat},
	}
	for _, name := range looms {
		if s := f.loom[name]; s != nil {
			_, body := payloadBodies(messages, tools, stores(name))
			targets = append(targets, loadgen.Target{Name: name, URL: s.url + "/v1/responses", Body: body})
		}
	}
	res, err := loadgen.Run(ctx, targets, loadgen.Options{Clients: 1, Rounds: cfg.payloadRequests, Deadline: until})
	if err != nil {
		return fmt.Errorf("%s: %w", payload, err)
	}
	if len(res[0]) == 0 {
		progress("%s: no time left", payload)
		return nil
	}
	line := fmt.Sprintf("%s, %d requests per target, p50:", payload, len(res[0]))
	for ti, t := range targets {
		p50 := ms(percentile(totals(res[ti]), 50))
		m[payloadKey(payload, t.Name)] = p50
		line += fmt.Sprintf(" %s %.2f ms", t.Name, p50)
	}
	progress("%s", line)
	return nil
}

// measureTools sends loom (store false) requests of cfg.tools and twice
// as many function tools, in turn, one at a time, and notes the median
// of its CPU per request of each: from just before the request to just
// after its answer, less what loom uses with no request. A collection of
// the garbage a request made is counted where it falls (requests of both
// sizes alternate); the median keeps one that fell on a request out.
func measureTools(ctx context.Context, cfg *config, f *fleet, m measures) error {
	s := f.loom[loomNoStore]
	client := &http.Client{Transport: loadgen.PooledTransport(1)}
	defer client.CloseIdleConnections()
	sizes := []int{cfg.tools, 2 * cfg.tools}
	targets := make([]loadgen.Target, len(sizes))
	for i, n := range sizes {
		_, body := payloadBodies(0, n, false)
		targets[i] = loadgen.Target{Name: fmt.Sprintf("%d tools", n), URL: s.url + "/v1/responses", Body: body}
		// Once unmeasured: the connection, and loom's first sight of
		// so many tools.
		if _, err := loadgen.Do(ctx, client, targets[i]); err != nil {
			return err
		}
	}
	idle, err := idleCPU(ctx, map[string]*server{s.name: s}, idleWindow)
	if err != nil {
		return err
	}
	cpu := make([][]float64, len(sizes)) // ms, per request
	for i := range cfg.toolsRequests {
		for k := range sizes {
			// Alternate which goes first.
			t := (i + k) % len(sizes)
			c0, err := s.cpu(ctx)
			if err != nil {
				return err
			}
			start := time.Now()
			if _, err := loadgen.Do(ctx, client, targets[t]); err != nil {
				return err
			}
			c1, err := s.cpu(ctx)
			if err != nil {
				return err
			}
			cpu[t] = append(cpu[t], ms(c1-c0-time.Duration(idle[s.name]*float64(time.Since(start)))))
		}
	}
	line := fmt.Sprintf("tools, %d requests of each, loom's CPU per request (median):", cfg.toolsRequests)
	for k, n := range sizes {
		m[toolsKey(n)] = median(cpu[k])
		line += fmt.Sprintf(" %d tools %.1f ms", n, m[toolsKey(n)])
	}
	progress("%s", line)
	return nil
}

// idleWindow is how long idleCPU watches the servers.
const idleWindow = 3 * time.Second

// idleCPU is the CPU each server uses with no request, in seconds per
// second, over window.
func idleCPU(ctx context.Context, servers map[string]*server, window time.Duration) (map[string]float64, error) {
	before := map[string]time.Duration{}
	for name, s := range servers {
		c, err := s.cpu(ctx)
		if err != nil {
			return nil, err
		}
		before[name] = c
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	elapsed := time.Since(start)
	rate := map[string]float64{}
	for name, s := range servers {
		c, err := s.cpu(ctx)
		if err != nil {
			return nil, err
		}
		rate[name] = float64(c-before[name]) / float64(elapsed)
	}
	return rate, nil
}
