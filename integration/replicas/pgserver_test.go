package replicas

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is a PostgreSQL cluster of one test's own, which the test may
// crash and start again on the same port: a fault the cluster every other
// test shares (LOOM_TEST_POSTGRES_URL, or pgtest's) must never see. It is
// what scripts/test does for the whole run: initdb and pg_ctl from
// Debian's /usr/lib/postgresql/*/bin, a temporary directory, a free
// loopback port, the postgres user when the tests run as root (PostgreSQL
// refuses to run as root).
type pgServer struct {
	bin  string // directory of initdb and pg_ctl
	dir  string // the temporary directory: data, socket, log
	port int
	cred *syscall.Credential // nil: run as ourselves
	// url is the connection URL of its postgres database.
	url string
}

// startPGServer initialises and starts a cluster, stopped and removed when
// the test ends.
func startPGServer(t *testing.T) *pgServer {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is private to the test's user, and
	// PostgreSQL may run as another.
	dir, err := os.MkdirTemp("", "loom-replicas-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &pgServer{bin: bin, dir: dir}
	t.Cleanup(func() {
		s.run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", s.data())
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := s.run("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// pgBinDir is the newest /usr/lib/postgresql/*/bin holding pg_ctl (Debian
// keeps them off PATH), else pg_ctl's directory on PATH.
func pgBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL is not installed: install it (Debian: apt-get install postgresql); scripts/test does when run as root")
}

func (s *pgServer) data() string { return filepath.Join(s.dir, "data") }

func (s *pgServer) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// start starts the server on its port and returns once it accepts
// connections: pg_ctl -w waits for that (the explicit signal), and a
// connection of our own, bounded in time, confirms it.
//
// Durability settings: fsync off is harmless here, since only the
// server's processes are crashed, never the machine (what was written
// reaches the kernel, which keeps it). synchronous_commit stays on: off,
// an immediate stop loses the last commits' WAL, and a client told
// "stored" would then be right to find its answer gone.
func (s *pgServer) start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=200", s.port, s.dir)
	if out, err := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return fmt.Errorf("PostgreSQL started but refuses connections: %v", err)
	}
	conn.Close(ctx)
	return nil
}

// crash stops the server the way a crash does: pg_ctl's immediate mode
// ends every server process at once (SIGQUIT), with no checkpoint, so the
// next start runs crash recovery. It returns once the postmaster is gone.
func (s *pgServer) crash() error {
	if out, err := s.run("pg_ctl", "stop", "-m", "immediate", "-w", "-t", "60", "-D", s.data()); err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
	return nil
}
