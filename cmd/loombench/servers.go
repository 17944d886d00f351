package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildLoom builds cmd/loom into dir, with this command's
// debugserver.go added (go build -overlay): the loom measured is loom's
// code and a listener of debug endpoints, off until the run turns it on.
// It returns the binary's path. src is the checkout to build from ("":
// the current directory's).
func buildLoom(ctx context.Context, dir, src string) (string, error) {
	list := exec.CommandContext(ctx, "go", "list", "-f", "{{.Dir}}",
		"github.com/loomgate/loom/cmd/loom", "github.com/loomgate/loom/cmd/loombench")
	list.Dir = src
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("find cmd/loom (run from the repository): %w", err)
	}
	dirs := strings.Fields(string(out))
	if len(dirs) != 2 {
		return "", fmt.Errorf("go list: %q", out)
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(dirs[0], "zz_loombench_debug.go"): filepath.Join(dirs[1], "debugserver.go")},
	})
	if err != nil {
		return "", err
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "loom")
	build := exec.CommandContext(ctx, "go", "build", "-overlay", overlayFile, "-o", bin, "github.com/loomgate/loom/cmd/loom")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build loom: %w\n%s", err, out)
	}
	return bin, nil
}

// server is one measured process.
type server struct {
	name     string
	url      string // its base URL
	debugURL string // where its pprof is served
	logFile  string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startServer runs bin with args, where addr and debugAddr are the
// addresses it is to serve on and pprof on, logging to dir/name.log, and
// waits until readyPath answers 200.
func startServer(ctx context.Context, name, dir, bin string, args func(addr string) []string, readyPath string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	debugAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, name+".log")
	logOut, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logOut.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args(addr)...)
	cmd.Env = append(serverEnv(), loombenchDebugAddrEnv+"="+debugAddr)
	cmd.Stdout, cmd.Stderr = logOut, logOut
	// Gone with this process, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{
		name: name, url: "http://" + addr, debugURL: "http://" + debugAddr, logFile: logFile,
		cmd: cmd, exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	// Ready when readyPath answers; bounded (a PostgreSQL store migrates
	// first).
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s exited before it was ready:\n%s", name, s.logTail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if s.get(ctx, s.url+readyPath) == nil && s.get(ctx, s.debugURL+"/debug/cpu") == nil {
			return s, nil
		}
	}
	s.stop()
	return nil, fmt.Errorf("%s not ready in 60 s:\n%s", name, s.logTail())
}

// serverEnv is this process's environment without loom's variables
// (every LOOM_X_Y sets loom's flag --x-y): the servers get their flags
// only.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOOM_") && !strings.HasPrefix(kv, loombenchDebugAddrEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *server) get(ctx context.Context, url string) error {
	return send(ctx, http.MethodGet, url, 2*time.Second)
}

// send sends a request with no body to url, within timeout, and wants a
// 200.
func send(ctx context.Context, method, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d: %s", method, url, resp.StatusCode, b)
	}
	return nil
}

// stop ends the server: SIGINT, then SIGKILL after 10 s.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// logTail is the end of the server's log, for an error message.
func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logFile)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// cpu is the process's user plus system CPU time so far, every thread's,
// as the process's getrusage says (/debug/cpu, debugserver.go): /proc's
// figures count in 10 ms ticks, a few of a short phase's requests.
func (s *server) cpu(ctx context.Context) (time.Duration, error) {
	body, err := s.debug(ctx, "/debug/cpu")
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: cpu: %w", s.name, err)
	}
	return time.Duration(ns), nil
}

// memStats is what the process holds after a forced GC.
type memStats struct {
	heapInuse, stackInuse int64
}

// memory forces a GC in the process and reads its heap and stacks in use
// (pprof's heap profile with gc=1, whose debug=1 text ends with the
// runtime.MemStats).
func (s *server) memory(ctx context.Context) (memStats, error) {
	body, err := s.debug(ctx, "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return memStats{}, err
	}
	var m memStats
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			m.heapInuse, err = strconv.ParseInt(v, 10, 64)
			found++
		} else if v, ok := strings.CutPrefix(line, "# Stack = "); ok {
			// "# Stack = inuse / sys"
			inuse, _, _ := strings.Cut(v, " ")
			m.stackInuse, err = strconv.ParseInt(inuse, 10, 64)
			found++
		}
		if err != nil {
			return memStats{}, fmt.Errorf("%s: heap profile: %q: %w", s.name, line, err)
		}
	}
	if found != 2 {
		return memStats{}, fmt.Errorf("%s: heap profile without HeapInuse and Stack", s.name)
	}
	return m, nil
}

// goroutines is the process's goroutine count.
func (s *server) goroutines(ctx context.Context) (int, error) {
	body, err := s.debug(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	// The first line: "goroutine profile: total N".
	first, _, _ := bytes.Cut(body, []byte("\n"))
	v, ok := strings.CutPrefix(string(first), "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("%s: goroutine profile starts %q", s.name, first)
	}
	return strconv.Atoi(v)
}

// startProfile starts a CPU profile of the process.
func (s *server) startProfile(ctx context.Context) error {
	_, err := s.debugPost(ctx, "/debug/cpuprofile/start")
	return err
}

// stopProfile ends the process's CPU profile and writes it to file.
func (s *server) stopProfile(ctx context.Context, file string) error {
	body, err := s.debugPost(ctx, "/debug/cpuprofile/stop")
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

func (s *server) debug(ctx context.Context, path string) ([]byte, error) {
	return s.debugDo(ctx, http.MethodGet, path)
}

func (s *server) debugPost(ctx context.Context, path string) ([]byte, error) {
	return s.debugDo(ctx, http.MethodPost, path)
}

func (s *server) debugDo(ctx context.Context, method, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.debugURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d: %.200s", resp.StatusCode, body)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", s.name, path, err)
	}
	return body, nil
}
