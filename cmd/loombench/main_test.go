package main

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/loomgate/loom/model/mockllm"
)

func TestMain(m *testing.M) {
	// The run's upstream and proxy are this test binary run again.
	serveIfAsked()
	os.Exit(m.Run())
}

// TestPaceScriptChunks: the scripted upstream answers a paced script in
// exactly the chunks asked for, a stream asking for usage as loom does.
func TestPaceScriptChunks(t *testing.T) {
	mock := mockllm.New(&mockllm.Options{Unrecorded: true})
	srv := httptest.NewServer(mock)
	defer srv.Close()
	defer mock.Close()
	for _, chunks := range []int{4, 5, 50, 51} {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(chatBody(true, paceScript(chunks, 0))))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: {") {
				got++
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || got != chunks {
			t.Errorf("%d chunks asked: status %d, %d chunks", chunks, resp.StatusCode, got)
		}
	}
}

// TestTableMediansOfRounds: a row is the median over the rounds of its
// value computed in each round, not a value of medians; a round whose
// value cannot be computed (the proxy added nothing) is left out.
func TestTableMediansOfRounds(t *testing.T) {
	cfg := &config{idleStreams: 10, tools: 10000}
	round := func(loomP50, directP50, proxyPayload float64) measures {
		return measures{
			e2eKey(streamed, "p50", loomSQLite):      loomP50,
			e2eKey(streamed, "p50", direct):          directP50,
			payloadKey(messagesPayload, loomNoStore): 4,
			payloadKey(messagesPayload, proxy):       proxyPayload,
			payloadKey(messagesPayload, direct):      2,
		}
	}
	rows := buildTable(cfg, []measures{
		round(101, 100, 3), // 1%, 2x
		round(204, 200, 2), // 2%, the proxy added nothing: no ratio
		round(303, 300, 4), // 1%, 1x (the medians of loom and direct: 2%)
	}, false)
	find := func(prefix string) row {
		for _, r := range rows {
			if strings.HasPrefix(r.name, prefix) {
				return r
			}
		}
		t.Fatalf("no row %q", prefix)
		return row{}
	}
	share := find("Added share of end-to-end time, streamed, p50: `store: true`, SQLite file")
	if !strings.HasPrefix(share.measured, "1.00% ") || share.met != "yes" || share.target != "≤ 1%" {
		t.Errorf("share row %+v, want 1.00%% (the median of 1, 2 and 1%%), met", share)
	}
	payload := find("1000 messages, added time over the proxy's: `store: false`")
	if !strings.HasPrefix(payload.measured, "1.50x ") || payload.met != "yes" {
		t.Errorf("payload row %+v, want 1.50x (the median of 2x and 1x)", payload)
	}
	if pg := find("Added share of end-to-end time, streamed, p50: `store: true`, PostgreSQL"); pg.measured != "not measured (no PostgreSQL)" {
		t.Errorf("PostgreSQL row %+v, want not measured", pg)
	}
	if r := find("Added share of end-to-end time, JSON, p99: `store: false`"); !strings.HasPrefix(r.measured, "not measured") {
		t.Errorf("a row of nothing measured: %+v", r)
	}
}

// TestRunSmall runs the whole benchmark at a tiny size, against loom
// built from this tree (and PostgreSQL, with LOOM_TEST_POSTGRES_URL), so
// that the script keeps working as loom changes: every row is measured
// (a ratio may be n/a: at this size the proxy may add no time). Its
// numbers mean nothing at this size; nothing is asserted of them.
func TestRunSmall(t *testing.T) {
	cfg, err := parseFlags([]string{
		"-rounds", "1", "-pace-requests", "8", "-clients", "4", "-chunks", "5",
		"-idle-streams", "20", "-payload-requests", "3", "-tools", "200", "-tools-requests", "1",
		"-workdir", t.TempDir(), "-profile", t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	t.Logf("\n%s", table)
	rows := 0
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| Row ") {
			continue
		}
		rows++
		if strings.Contains(line, "not measured") && (cfg.postgresURL != "" || !strings.Contains(line, "PostgreSQL")) {
			t.Errorf("row not measured: %s", line)
		}
	}
	// 16 shares, 6 CPU ratios, memory, 6 payload ratios, tools, 4 idle CPU.
	if rows != 34 {
		t.Errorf("%d rows, want 34", rows)
	}
	if !strings.Contains(table, "Commit ") || !strings.Contains(table, "cores (nproc)") {
		t.Errorf("no commit or machine line:\n%s", table)
	}
	if cfg.postgresURL != "" {
		for _, kind := range []string{"streamed", "json"} {
			if _, err := os.Stat(cfg.profileDir + "/loom-postgres-" + kind + ".pprof"); err != nil {
				t.Error(err)
			}
		}
	}
	for _, kind := range []string{"streamed", "json"} {
		if _, err := os.Stat(cfg.profileDir + "/loom-sqlite-" + kind + ".pprof"); err != nil {
			t.Error(err)
		}
	}
}
