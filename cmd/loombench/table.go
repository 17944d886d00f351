package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// row is one line of the table.
type row struct {
	name, target, measured, met string
}

// configName is how the table names a target.
var configName = map[string]string{
	loomSQLite:   "`store: true`, SQLite file",
	loomPostgres: "`store: true`, PostgreSQL",
	loomNoStore:  "`store: false`",
	proxy:        "bare proxy, for reference",
}

// median of xs (not empty); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// series is one derived value per round, and the medians of its inputs.
type series struct {
	values []float64 // per round where it could be computed
	inputs []float64 // the median over rounds of each input key
}

// derive computes f of the keys' values in every round that has them all.
func derive(rounds []measures, keys []string, f func(v []float64) (float64, bool)) series {
	var s series
	in := make([][]float64, len(keys))
	for _, m := range rounds {
		v := make([]float64, len(keys))
		all := true
		for i, k := range keys {
			x, ok := m[k]
			if !ok {
				all = false
				break
			}
			v[i] = x
		}
		if !all {
			continue
		}
		for i := range keys {
			in[i] = append(in[i], v[i])
		}
		if x, ok := f(v); ok {
			s.values = append(s.values, x)
		}
	}
	for _, xs := range in {
		if len(xs) == 0 {
			return series{}
		}
		s.inputs = append(s.inputs, median(xs))
	}
	return s
}

// spread lists the rounds' values, when there are several.
func (s series) spread(format string) string {
	if len(s.values) < 2 {
		return ""
	}
	parts := make([]string, len(s.values))
	for i, v := range s.values {
		parts[i] = fmt.Sprintf(format, v)
	}
	return "; rounds " + strings.Join(parts, ", ")
}

// met is "yes" or "no", or "" without a target.
func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// missing is the row of a value no round could compute: "not measured"
// when no round measured its inputs (why says why), else noValue says
// what made every round's value undefined.
func missing(name, target string, s series, why, noValue string) row {
	if len(s.inputs) == 0 {
		return row{name, target, "not measured" + why, "—"}
	}
	return row{name, target, "n/a: " + noValue, "—"}
}

func buildTable(cfg *config, rounds []measures, postgres bool) []row {
	var rows []row
	why := func(target string) string {
		if target == loomPostgres && !postgres {
			return " (no PostgreSQL)"
		}
		return ""
	}

	// The added share of the end-to-end time at the pace.
	for _, kind := range []string{streamed, whole} {
		for _, p := range []string{"p50", "p99"} {
			limit := map[string]float64{"p50": 1, "p99": 3}[p]
			for _, t := range append(slices.Clone(looms), proxy) {
				name := fmt.Sprintf("Added share of end-to-end time, %s, %s: %s", kind, p, configName[t])
				target := fmt.Sprintf("≤ %g%%", limit)
				if t == proxy {
					target = "—"
				}
				s := derive(rounds, []string{e2eKey(kind, p, t), e2eKey(kind, p, direct)}, func(v []float64) (float64, bool) {
					return (v[0] - v[1]) / v[1] * 100, true
				})
				if len(s.values) == 0 {
					rows = append(rows, missing(name, target, s, why(t), ""))
					continue
				}
				share := median(slices.Clone(s.values))
				measured := fmt.Sprintf("%.2f%% (%+.1f ms on %.1f ms%s)", share, s.inputs[0]-s.inputs[1], s.inputs[1], s.spread("%.2f"))
				r := row{name, target, measured, met(share <= limit)}
				if t == proxy {
					r.met = "—"
				}
				rows = append(rows, r)
			}
		}
	}

	// CPU per request over the proxy's.
	for _, kind := range []string{streamed, whole} {
		for _, t := range looms {
			limit := 3.0
			if !stores(t) {
				limit = 2
			}
			name := fmt.Sprintf("CPU per request over the proxy's (CPU with no request taken out), %s: %s", kind, configName[t])
			target := fmt.Sprintf("≤ %gx", limit)
			s := derive(rounds, []string{cpuKey(kind, t), cpuKey(kind, proxy)}, func(v []float64) (float64, bool) {
				return v[0] / v[1], v[1] > 0
			})
			all := derive(rounds, []string{cpuAllKey(kind, t), cpuAllKey(kind, proxy)}, func(v []float64) (float64, bool) {
				return v[0] / v[1], v[1] > 0
			})
			if len(s.values) == 0 || len(all.values) == 0 {
				rows = append(rows, missing(name, target, s, why(t), "the proxy used no CPU, or loom less than none with its idle CPU out"))
				continue
			}
			ratio := median(slices.Clone(s.values))
			measured := fmt.Sprintf("%.2fx (%.0f vs %.0f µs%s; with it: %.2fx, %.0f µs)", ratio, s.inputs[0], s.inputs[1], s.spread("%.2f"),
				median(slices.Clone(all.values)), all.inputs[0])
			rows = append(rows, row{name, target, measured, met(ratio <= limit)})
		}
	}

	// Memory per idle open stream.
	{
		name := fmt.Sprintf("Memory per idle open stream (%d open): %s", cfg.idleStreams, configName[loomSQLite])
		const target = "≤ 64 KB"
		s := derive(rounds, []string{idleKey(loomSQLite), idleKey(proxy)}, func(v []float64) (float64, bool) {
			return v[0] / 1024, true
		})
		if len(s.values) == 0 {
			rows = append(rows, missing(name, target, s, "", ""))
		} else {
			kb := median(slices.Clone(s.values))
			measured := fmt.Sprintf("%.1f KB (proxy: %.1f KB%s)", kb, s.inputs[1]/1024, s.spread("%.1f"))
			rows = append(rows, row{name, target, measured, met(kb <= 64)})
		}
	}

	// The request's size: loom's added time over the proxy's.
	for _, payload := range []string{messagesPayload, toolsPayload} {
		for _, t := range looms {
			name := fmt.Sprintf("%s, added time over the proxy's: %s", payload, configName[t])
			const target = "≤ 2x"
			s := derive(rounds, []string{payloadKey(payload, t), payloadKey(payload, proxy), payloadKey(payload, direct)}, func(v []float64) (float64, bool) {
				// A proxy that added nothing gives no ratio.
				return (v[0] - v[2]) / (v[1] - v[2]), v[1] > v[2]
			})
			if len(s.values) == 0 {
				rows = append(rows, missing(name, target, s, why(t), "the proxy added no time"))
				continue
			}
			ratio := median(slices.Clone(s.values))
			measured := fmt.Sprintf("%.2fx (%+.2f vs %+.2f ms on %.2f ms%s)", ratio,
				s.inputs[0]-s.inputs[2], s.inputs[1]-s.inputs[2], s.inputs[2], s.spread("%.2f"))
			rows = append(rows, row{name, target, measured, met(ratio <= 2)})
		}
	}

	// Linear in the tools.
	{
		name := fmt.Sprintf("%s tools over %s, loom's CPU per request: %s", thousands(2*cfg.tools), thousands(cfg.tools), configName[loomNoStore])
		const target = "≤ 2.5x"
		s := derive(rounds, []string{toolsKey(2 * cfg.tools), toolsKey(cfg.tools)}, func(v []float64) (float64, bool) {
			return v[0] / v[1], v[1] > 0
		})
		if len(s.values) == 0 {
			rows = append(rows, missing(name, target, s, "", "no CPU measured for the fewer tools"))
		} else {
			ratio := median(slices.Clone(s.values))
			measured := fmt.Sprintf("%.2fx (%.1f vs %.1f ms%s)", ratio, s.inputs[0], s.inputs[1], s.spread("%.2f"))
			rows = append(rows, row{name, target, measured, met(ratio <= 2.5)})
		}
	}

	// What the servers use with no request, taken out of the CPU rows.
	for _, t := range append(slices.Clone(looms), proxy) {
		name := "CPU with no request in flight: " + configName[t]
		s := derive(rounds, []string{idleCPUKey(streamed, t), idleCPUKey(whole, t)}, func(v []float64) (float64, bool) {
			return (v[0] + v[1]) / 2, true
		})
		if len(s.values) == 0 {
			rows = append(rows, missing(name, "—", s, why(t), ""))
			continue
		}
		perSecond := median(slices.Clone(s.values))
		rows = append(rows, row{name, "—", fmt.Sprintf("%.1f ms/s (%.1f%% of a core%s)", perSecond, perSecond/10, s.spread("%.1f")), "—"})
	}
	return rows
}

// writeReport prints where and when the table was measured, then the
// table, in markdown.
func writeReport(w io.Writer, cfg *config, rows []row, rounds int, took time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Commit %s, %s; %s; median of %d rounds (%s); the run took %s.\n\n",
		commit(), time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), rounds, paceLine(cfg), took.Round(time.Second))
	b.WriteString("| Row | Target | Measured | Met? |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.name, r.target, r.measured, r.met)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// paceLine says what the pace was.
func paceLine(cfg *config) string {
	return fmt.Sprintf("pace: ~%d chunks %s apart, %d clients", cfg.chunks, cfg.chunkPause, cfg.clients)
}

// commit is the checked-out commit, and whether the tree differs from it.
func commit() string { return commitIn("") }

// commitIn is commit of the checkout in dir ("": the current directory).
func commitIn(dir string) string {
	rev := exec.Command("git", "rev-parse", "--short=12", "HEAD")
	rev.Dir = dir
	out, err := rev.Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	status := exec.Command("git", "status", "--porcelain", "--untracked-files=no")
	status.Dir = dir
	if st, err := status.Output(); err == nil && len(st) > 0 {
		c += " with uncommitted changes"
	}
	return c
}

// machine is the core count and CPU model.
func machine() string {
	model := "unknown CPU"
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(info), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (nproc), %s, %s/%s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// thousands writes 10000 as 10k.
func thousands(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
