package replicas

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/loomgate/loom/internal/testutil"
)

// haproxyConfig is the balancer's configuration. Besides what an operator
// would write (see docs/operations.md, "Replicas"), it names the replica that answered
// in the X-Loom-Replica header, so the tests know where a response ran,
// and has a stats socket the tests read the servers' states from.
var haproxyConfig = template.Must(template.New("haproxy.cfg").Parse(`global
	maxconn 1000
	stats socket {{.Socket}} level admin
	log stderr format raw local0

defaults
	mode http
	log global
	option httplog
	timeout connect 1s
	timeout client 60s
	timeout server 60s
	timeout check 2s
{{- if .Retries}}
	# A request that could not reach a replica (connection refused, or
	# closed before any answer) goes to another one.
	retries 3
	option redispatch 1
	retry-on conn-failure empty-response
{{- else}}
	# No retries: what reaches a stopped replica fails.
	retries 0
	retry-on none
{{- end}}
	# A request is forwarded once HAProxy has it whole, so that it can
	# send it again: one forwarded while its body was still arriving got
	# no retry when its replica died before answering, and its client
	# an EOF (in 4 of 6 runs of TestKillMidStream; none in 9 with this).
	option http-buffer-request

frontend loom
	bind {{.Addr}}
	default_backend replicas

backend replicas
	balance roundrobin
	# A new connection to a replica for each request. A kept-alive one,
	# held for the client's next request, may belong to a replica killed
	# since: HAProxy then closes the client's connection without an
	# answer (1 request in 4 runs of TestKillMidStream failed so, none in
	# 5 runs with this option). On loopback or a LAN the connect is cheap.
	option httpchk GET /readyz
	default-server check inter 100ms fall 1 rise 1
	http-response set-header X-Loom-Replica %s
{{- range .Servers}}
	server {{.Name}} {{.Addr}}
{{- end}}
`))

// balancer is a running HAProxy in front of the replicas.
type balancer struct {
	addr   string
	socket string
	logs   testutil.LockedBuffer // HAProxy's output
}

// haproxyMissing says how to install HAProxy; the tests fail with it
// rather than skip.
const haproxyMissing = "haproxy is not on PATH: install it (Debian: apt-get install haproxy; scripts/test does when run as root)"

// startBalancer writes the configuration for replicas, checks it, starts
// HAProxy and waits, bounded, until it reports every replica up.
func startBalancer(t *testing.T, replicas ...*replica) *balancer {
	t.Helper()
	return startBalancerWith(t, true, replicas...)
}

// startBalancerWith is startBalancer, with retries on connection failure
// or none (a balancer that only health-checks).
func startBalancerWith(t *testing.T, retries bool, replicas ...*replica) *balancer {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal(haproxyMissing)
	}
	dir := t.TempDir()
	b := &balancer{addr: freePort(t), socket: filepath.Join(dir, "admin.sock")}
	type server struct{ Name, Addr string }
	data := struct {
		Addr, Socket string
		Retries      bool
		Servers      []server
	}{Addr: b.addr, Socket: b.socket, Retries: retries}
	for _, r := range replicas {
		data.Servers = append(data.Servers, server{r.name, r.addr})
	}
	var cfg bytes.Buffer
	if err := haproxyConfig.Execute(&cfg, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, cfg.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, cfg.String())
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = &b.logs, &b.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start haproxy: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("haproxy logs (requests that ended normally, ----, left out):\n%s", b.unusualLogs())
		}
	})
	for _, r := range replicas {
		b.waitState(t, r.name, "UP")
	}
	return b
}

func (b *balancer) url() string { return "http://" + b.addr }

// states returns each replica's status as HAProxy sees it ("UP", "DOWN",
// ...), from "show stat" on the stats socket.
func (b *balancer) states() (map[string]string, error) {
	conn, err := net.DialTimeout("unix", b.socket, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("show stat\n")); err != nil {
		return nil, err
	}
	var text bytes.Buffer
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		text.WriteString(strings.TrimPrefix(sc.Text(), "# ") + "\n")
	}
	rows, err := csv.NewReader(&text).ReadAll()
	if err != nil || len(rows) < 1 {
		return nil, fmt.Errorf("show stat: %v: %q", err, text.String())
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	out := map[string]string{}
	for _, row := range rows[1:] {
		if len(row) > col["status"] && row[col["pxname"]] == "replicas" {
			out[row[col["svname"]]] = row[col["status"]]
		}
	}
	return out, nil
}

// waitState waits until HAProxy reports replica name in state (its health
// checks run every 100ms), bounded in time and count.
func (b *balancer) waitState(t *testing.T, name, state string) {
	t.Helper()
	if err := b.awaitState(name, state); err != nil {
		t.Fatal(err)
	}
}

// awaitState is waitState returning its failure, for a goroutine that
// may not call t.Fatal.
func (b *balancer) awaitState(name, state string) error {
	var last map[string]string
	var err error
	if testutil.Eventually(10*time.Second, func() bool {
		last, err = b.states()
		return err == nil && strings.HasPrefix(last[name], state)
	}) {
		return nil
	}
	return fmt.Errorf("haproxy did not report %s %s within 10s: %v %v", name, state, last, err)
}

// unusualLogs is HAProxy's log without the requests whose termination
// state is "----" (no error, no abort, no retry), and without the idle
// connections clients closed before sending anything on them ("CR--",
// "<BADREQ>": Go's client closes those it has no room to keep idle).
func (b *balancer) unusualLogs() string {
	var out strings.Builder
	for line := range strings.Lines(b.logs.String()) {
		idleClosed := strings.Contains(line, " CR-- ") && strings.Contains(line, `"<BADREQ>"`)
		if !strings.Contains(line, " ---- ") && !idleClosed {
			out.WriteString(line)
		}
	}
	return out.String()
}
