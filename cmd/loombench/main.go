// Command loombench measures what loom costs a user of a real engine and
// prints the table of docs/performance.md: every row a share or a ratio
// of one run, side by side with the same requests sent straight to the
// upstream and through a bare pooled httputil.ReverseProxy, so that the
// machine's speed cancels out. scripts/bench builds and runs it.
//
// Every server measured runs in a process of its own, as deployed: the
// scripted upstream (this binary, "loombench upstream"), the proxy
// ("loombench proxy") and three loom processes (cmd/loom, built by this
// command with debugserver.go added): store true on a SQLite file, store
// true on PostgreSQL (a database made for the run), store false. This
// process is the clients. A server's CPU is its process's getrusage
// (every thread), read from it over loopback; its memory is its heap and
// stacks after a forced GC (pprof).
//
// The run is in rounds (-rounds, default 3); each round measures every
// row once, and the table gives each row's median over the rounds (a
// round's value is computed from that round's measures alone). A round
// is:
//
//   - the realistic pace, streamed then JSON: the upstream answers in 50
//     chunks 3 ms apart (a JSON answer comes when its stream would have
//     ended); 16 clients (-clients) each send one request
//     to every target in turn, in an order shuffled anew each time
//     (internal/loadgen), so that all targets see the same machine.
//     Rows: loom's added share of the end-to-end time at p50 and p99,
//     (loom - direct) / direct, and its CPU per request over the
//     proxy's. What a server uses with no request at all (loom's
//     background jobs poll its store) is measured for 3 s before and
//     after the phase and that rate taken out of the phase's CPU: it is
//     a cost per second, not per request, and has rows of its own;
//   - memory per idle open stream: -idle-streams streams through loom
//     (store true, SQLite) whose upstream stalls after the first piece
//     of the answer: loom's heap and stacks with them open minus before,
//     over their number; the proxy's the same way, for reference;
//   - 1000 history messages and 100 tools, one client, an answer without
//     pauses (the pace would only add noise to a difference of a few
//     ms): loom's added time at p50 over the proxy's, the same payload;
//   - 10k and 20k function tools (store false), one at a time: the
//     median of loom's CPU per request, 20k over 10k.
//
// "loombench cache" (scripts/bench-cache) is another benchmark: how much
// of agent sessions' prompts a fleet of engines simulating a prefix cache
// serves from it, depending on how loom reaches them (cache.go).
//
// A phase stops early at its time limit (-pace-time, -payload-time) and
// a round that would end past -budget is not started: a slow machine
// gives fewer requests or rounds, not a long run. With -profile DIR the
// store-true loom processes are profiled (pprof CPU profiles) during the
// first round's paced phases.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	serveIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "cache" {
		exitOn(runCache(ctx, os.Args[2:], os.Stdout))
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		exitOn(err)
	}
	exitOn(run(ctx, cfg, os.Stdout))
}

// serveIfAsked serves and exits when this binary is run again as one of
// the run's servers ("loombench upstream ...", "loombench proxy ...").
func serveIfAsked() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "upstream":
		exitOn(serveUpstream(os.Args[2:]))
	case "proxy":
		exitOn(serveProxy(os.Args[2:]))
	case "engine":
		exitOn(serveEngine(os.Args[2:]))
	default:
		return
	}
	os.Exit(0)
}

func exitOn(err error) {
	if err == nil {
		return
	}
	if err != flag.ErrHelp {
		fmt.Fprintln(os.Stderr, "loombench:", err)
	}
	os.Exit(2)
}

// config is what the flags set.
type config struct {
	rounds int
	// budget bounds the whole run, the build included: a round that
	// would not fit is not started, and each phase stops early at its
	// share of it.
	budget time.Duration

	clients      int           // at the pace
	paceRequests int           // per target, per kind, per round
	paceTime     time.Duration // at most, per kind, per round
	chunks       int           // upstream chunks per paced answer
	chunkPause   time.Duration // between two chunks

	idleStreams int

	payloadRequests int           // per target, per payload, per round
	payloadTime     time.Duration // at most, per payload, per round
	toolsRequests   int           // per size, per round
	tools           int           // the smaller count; the larger is twice

	postgresURL string // "" measures no PostgreSQL rows
	profileDir  string
	workDir     string // "": a temporary directory, removed at the end
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("loombench", flag.ContinueOnError)
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; every row is the median of its rounds")
	fs.DurationVar(&c.budget, "budget", 8*time.Minute+30*time.Second, "the longest the whole run may take: rounds that would not fit are dropped, phases stop early")
	fs.IntVar(&c.clients, "clients", 16, "at the pace: concurrent clients, each sending to every target in turn")
	fs.IntVar(&c.paceRequests, "pace-requests", 800, "at the pace: requests per target, per kind (streamed, JSON) and round")
	fs.DurationVar(&c.paceTime, "pace-time", 40*time.Second, "at the pace: the longest one kind may take per round")
	fs.IntVar(&c.chunks, "chunks", 50, "at the pace: chunks per upstream answer")
	fs.DurationVar(&c.chunkPause, "chunk-pause", 3*time.Millisecond, "at the pace: pause between two chunks")
	fs.IntVar(&c.idleStreams, "idle-streams", 1000, "streams held open for the memory row")
	fs.IntVar(&c.payloadRequests, "payload-requests", 300, "1000 messages, 100 tools: requests per target and round")
	fs.DurationVar(&c.payloadTime, "payload-time", 10*time.Second, "1000 messages, 100 tools: the longest one payload may take per round")
	fs.IntVar(&c.toolsRequests, "tools-requests", 7, "10k and 20k tools: requests of each per round")
	fs.IntVar(&c.tools, "tools", 10000, "the smaller tool count of the tools row (the larger is twice as many)")
	fs.StringVar(&c.postgresURL, "postgres", os.Getenv("LOOM_TEST_POSTGRES_URL"), "PostgreSQL server URL; a database is created for the run and dropped after (empty: no PostgreSQL rows)")
	fs.StringVar(&c.profileDir, "profile", "", "write CPU profiles of the store-true loom processes in the first round's paced phases to this directory (the profiler adds to their CPU in that round)")
	fs.StringVar(&c.workDir, "workdir", "", "directory for the binaries, the SQLite files and the servers' logs (empty: a temporary one, removed after)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case c.rounds < 1:
		return nil, fmt.Errorf("-rounds must be at least 1")
	case c.clients < 1, c.paceRequests < 1, c.idleStreams < 1, c.payloadRequests < 1, c.toolsRequests < 1, c.tools < 1:
		return nil, fmt.Errorf("-clients, -pace-requests, -idle-streams, -payload-requests, -tools-requests and -tools must be at least 1")
	case c.chunks < 4:
		return nil, fmt.Errorf("-chunks must be at least 4")
	}
	return c, nil
}
