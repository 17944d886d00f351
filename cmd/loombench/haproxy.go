package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// roundRobinConfig is HAProxy balancing requests round robin over
// engines, as a team with several engine replicas and no router puts one
// in front of them: each request goes to the next engine, whatever
// conversation it belongs to (HAProxy balances every request of a
// kept-alive connection anew).
var roundRobinConfig = template.Must(template.New("haproxy.cfg").Parse(`global
	maxconn 2000

defaults
	mode http
	timeout connect 1s
	timeout client 120s
	timeout server 120s

frontend engines
	bind {{.Addr}}
	default_backend engines

backend engines
	balance roundrobin
	option httpchk GET /v1/models
	default-server check inter 1s
{{- range $i, $e := .Engines}}
	server engine{{$i}} {{$e}}
{{- end}}
`))

// startRoundRobin starts HAProxy balancing round robin over the engines'
// base URLs, logging to dir/haproxy.log, and waits until it answers
// GET /v1/models. The server it returns has no debug endpoints.
func startRoundRobin(ctx context.Context, dir string, engines []string) (*server, error) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, fmt.Errorf("haproxy is not on PATH (Debian: apt-get install haproxy): %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var hosts []string
	for _, e := range engines {
		hosts = append(hosts, strings.TrimPrefix(e, "http://"))
	}
	var cfg strings.Builder
	if err := roundRobinConfig.Execute(&cfg, struct {
		Addr    string
		Engines []string
	}{addr, hosts}); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "haproxy.log")
	logOut, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logOut.Close()
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = logOut, logOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	s := &server{name: "haproxy", url: "http://" + addr, logFile: logFile, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("haproxy exited before it was ready:\n%s", s.logTail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if s.get(ctx, s.url+"/v1/models") == nil {
			return s, nil
		}
	}
	s.stop()
	return nil, fmt.Errorf("haproxy not ready in 30 s:\n%s", s.logTail())
}
