package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding the URL of a server to use instead of
// a private cluster. Its user must be allowed to create databases.
const EnvURL = "LOOM_TEST_POSTGRES_URL"

var (
	once    sync.Once
	server  string // URL of the server's maintenance database
	cluster *Cluster
	openErr error
)

// URL returns the URL of a new, empty database for t, dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			server = u
			return
		}
		cluster, openErr = StartCluster(nil)
		if openErr == nil {
			server = cluster.url
		}
	})
	if openErr != nil {
		t.Fatalf("pgtest: %v", openErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("pgtest: connect to the test server: %v", err)
	}
	defer admin.Close(context.Background())
	name := "loomtest_" + randomHex(8)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer admin.Close(context.Background())
		// FORCE ends connections a test left open.
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Main runs the tests of m and then stops the private cluster, if one was
// started. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		if err := cluster.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop cluster: %v\n", err)
		}
	}
	return code
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Cluster is a PostgreSQL cluster of this process's own, in a temporary
// directory, on a free loopback port: initdb and pg_ctl from Debian's
// /usr/lib/postgresql/*/bin, run as the postgres user when the tests run
// as root (PostgreSQL refuses to run as root). URL uses one, shared by
// the tests of a binary; a test that crashes PostgreSQL starts one of its
// own, which no other test sees.
type Cluster struct {
	bin  string // directory of initdb, pg_ctl
	dir  string // temporary directory: data, socket, log
	port int
	cred *syscall.Credential // nil: run as ourselves
	opts string              // the server's settings, for every start
	url  string
}

// ClusterOptions configure a Cluster; nil means the defaults.
type ClusterOptions struct {
	// Durable keeps synchronous_commit on: a cluster that is crashed
	// (Crash) then keeps every commit it acknowledged. Off, commits are
	// cheaper and an immediate stop may lose the last of them.
	Durable bool
}

const installHint = "PostgreSQL is not installed: install it (Debian: apt-get install postgresql), " +
	"or set " + EnvURL + " to a server whose user may create databases; scripts/test does either"

// binDir finds the directory holding initdb and pg_ctl: the newest
// /usr/lib/postgresql/*/bin (Debian keeps them off PATH), else PATH.
func binDir() (string, error) {
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
	return "", errors.New(installHint)
}

// StartCluster initialises a cluster and starts it; Remove stops it and
// removes its files.
func StartCluster(opts *ClusterOptions) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: its parent is private to the test's user, and
	// PostgreSQL may run as another.
	dir, err := os.MkdirTemp("", "loom-pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if c.port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// Durability is not what the tests check, but for a cluster that is
	// crashed: fsync off is harmless there too (only the server's
	// processes die, never the machine, and the kernel keeps what was
	// written), synchronous_commit is not.
	c.opts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=200", c.port, dir)
	if opts == nil || !opts.Durable {
		c.opts += " -c synchronous_commit=off"
	}
	c.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	if err := c.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// URL is the connection URL of the cluster's postgres database.
func (c *Cluster) URL() string { return c.url }

// Start starts the cluster on its port, and returns once it accepts
// connections: pg_ctl -w waits for that, and a connection of our own,
// bounded in time, confirms it.
func (c *Cluster) Start() error {
	if out, err := c.run("pg_ctl", "start", "-w", "-t", "60", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-o", c.opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		return fmt.Errorf("PostgreSQL started but refuses connections: %v", err)
	}
	return conn.Close(ctx)
}

// Crash stops the cluster the way a crash does: pg_ctl's immediate mode
// ends every server process at once, with no checkpoint, so the next
// Start runs crash recovery. It returns once the postmaster is gone.
func (c *Cluster) Crash() error {
	if out, err := c.run("pg_ctl", "stop", "-m", "immediate", "-w", "-t", "60", "-D", c.data()); err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
	return nil
}

// Remove stops the cluster, if it runs, and removes its files.
func (c *Cluster) Remove() error {
	c.run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", c.data())
	return os.RemoveAll(c.dir)
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before PostgreSQL binds it; pg_ctl then fails and says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
