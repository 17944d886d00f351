// Package mcptest runs real MCP servers on loopback ports for tests: the
// go-sdk's conformance everything-server (stateless 2026-07-28), built from
// the go-sdk version in go.mod, and npm's session-based
// @modelcontextprotocol/server-everything (2025-11-25).
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
)

// everythingPkg is the everything-server, a test fixture of the go-sdk
// module.
const everythingPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

var (
	buildOnce sync.Once
	buildDir  string // removed by RemoveBuild
	buildBin  string
	buildErr  error
)

// BuildEverything builds the everything-server once per test binary, with
// a copy of go.mod so the build never edits the real one, and returns the
// binary's path. A package whose tests call it removes the build with
// RemoveBuild in its TestMain.
func BuildEverything(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "loom-everything-")
		if buildErr == nil {
			buildBin, buildErr = build(buildDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// RemoveBuild removes what BuildEverything built, if anything.
func RemoveBuild() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// build builds the everything-server into dir.
func build(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "everything-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=mod", "-modfile="+filepath.Join(dir, "go.mod"), "-o", bin, everythingPkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building everything-server: %v\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot is the directory of the go.mod above the working directory
// (a test's package directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("mcptest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// StartEverything builds (once) and runs the everything-server on a
// loopback port until the test ends, and returns its URL.
func StartEverything(t testing.TB) string {
	t.Helper()
	bin := BuildEverything(t)
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	StartProcess(t, exec.Command(bin, "-http", addr), addr)
	return "http://" + addr + "/"
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartProcess starts cmd, kills it when the test ends, and waits until
// addr accepts connections.
func StartProcess(t testing.TB, cmd *exec.Cmd, addr string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var err error
	listening := func() bool {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
		}
		return err == nil
	}
	if !testutil.Eventually(20*time.Second, listening) {
		t.Fatalf("%s not listening on %s: %v", cmd.Path, addr, err)
	}
}

// loopbackPreload makes a Node server that listens on all interfaces
// listen on 127.0.0.1 only.
const loopbackPreload = `
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    const cb = args.find(a => typeof a === 'function');
    return listen.call(this, { port: Number(args[0]), host: '127.0.0.1' }, cb);
  }
  if (args[0] && typeof args[0] === 'object' && !args[0].path) {
    args[0] = Object.assign({}, args[0], { host: '127.0.0.1' });
  }
  return listen.apply(this, args);
};
`

// StartNodeEverything runs npm's @modelcontextprotocol/server-everything
// (streamable HTTP, at /mcp) on a loopback port until the test ends. It
// returns the server's address and a function returning what the server
// has written so far (stdout and stderr). It needs
// npm ci --prefix tools/mcp/testdata/node.
func StartNodeEverything(t testing.TB) (addr string, output func() string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, "tools", "mcp", "testdata", "node", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("server-everything not installed (%v): run npm ci --prefix tools/mcp/testdata/node (scripts/test does)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH")
	}
	preload := filepath.Join(t.TempDir(), "loopback.cjs")
	if err := os.WriteFile(preload, []byte(loopbackPreload), 0o644); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	cmd := exec.Command(node, "--require", preload, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second // should the server leave a child holding its output
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	StartProcess(t, cmd, addr)
	return addr, out.String
}
