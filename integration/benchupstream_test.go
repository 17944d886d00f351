package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// Where the benchmarks' scripted upstream runs. By default it is served in
// the benchmark's own process, beside loom, the proxy and the client; with
// LOOM_BENCH_UPSTREAM=process it is a process of its own (this test binary
// run again), as a real engine always is.
//
// The difference matters at one client: in one process the Go scheduler
// notices a connection that became readable only when a P runs out of
// work, so the upstream's handler writes its whole answer before loom, or
// the proxy, reads any of it, and the client's first delta waits for all
// of loom's work on the stream. In a process of its own the upstream's
// writes wake loom's process as they happen.
const (
	benchUpstreamEnv = "LOOM_BENCH_UPSTREAM"
	// benchUpstreamServeEnv, set in the child's environment, makes the
	// test binary serve the upstream instead of running tests.
	benchUpstreamServeEnv = "LOOM_BENCH_UPSTREAM_SERVE"
)

// serveBenchUpstreamIfAsked serves the scripted upstream and exits when
// this process is a benchmark's upstream: it prints its address on a line
// of its own, then serves until its standard input ends (the benchmark
// closed it, or died).
func serveBenchUpstreamIfAsked() {
	if os.Getenv(benchUpstreamServeEnv) != "1" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench upstream:", err)
		os.Exit(2)
	}
	mock := mockllm.New(&mockllm.Options{Unrecorded: true})
	go func() { _ = http.Serve(ln, mock) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	mock.Close()
	os.Exit(0)
}

// benchUpstreamURL is the base URL (ending in /v1) of a scripted upstream
// in a process of its own when LOOM_BENCH_UPSTREAM=process, else "" (the
// harness's own, in this process). The process ends with the benchmark.
func benchUpstreamURL(b *testing.B) string {
	b.Helper()
	own, err := benchOwnProcess(benchUpstreamEnv)
	if err != nil {
		b.Fatal(err)
	}
	if !own {
		return ""
	}
	cmd := benchProcess(benchUpstreamServeEnv)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	b.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// The child's first line is its address; the read ends when it
	// prints it or exits.
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err != nil {
		b.Fatalf("bench upstream: no address: %v", err)
	}
	return "http://" + strings.TrimSpace(addr) + "/v1"
}

// benchOwnProcess reports whether the variable env asks for a helper in a
// process of its own: "process" does, "" and "inprocess" do not.
func benchOwnProcess(env string) (bool, error) {
	switch mode := os.Getenv(env); mode {
	case "", "inprocess":
		return false, nil
	case "process":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want process or inprocess", env, mode)
	}
}

// benchProcess is this test binary run again as a benchmark's helper
// process: serveEnv=1 in its environment makes TestMain serve instead of
// running tests (serveBenchUpstreamIfAsked, serveBenchClientIfAsked). Its
// standard error is this process's.
func benchProcess(serveEnv string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = os.Stderr
	return cmd
}
