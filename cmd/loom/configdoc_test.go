package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite the flag tables of docs/configuration.md from the serve flags")

const configurationDoc = "../../docs/configuration.md"

// TestConfigurationDoc fails when docs/configuration.md and the serve
// flags (what loom serve --help prints) drift apart: a flag added,
// removed, or its default or usage changed. The flag tables are generated;
// the prose around them is kept as written.
//
//	go test ./cmd/loom -run TestConfigurationDoc -update
func TestConfigurationDoc(t *testing.T) {
	old, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := renderConfigurationDoc(string(old), serveFlagHelp())
	if err != nil {
		t.Fatal(err)
	}
	if *updateDocs {
		if err := os.WriteFile(configurationDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != string(old) {
		t.Errorf("docs/configuration.md does not match the serve flags; run\n\tgo test ./cmd/loom -run TestConfigurationDoc -update\n%s", firstDifference(string(old), doc))
	}
}

// TestConfigurationDocPlacesEveryFlag checks the generator itself: a flag
// that no table of the document claims is an error, not a silent
// omission, and each table lists exactly the flags its patterns claim
// first.
func TestConfigurationDocPlacesEveryFlag(t *testing.T) {
	flags := []flagHelp{
		{Name: "addr", Env: "LOOM_ADDR", Default: "127.0.0.1:8080", Usage: "address to listen on"},
		{Name: "upstream-url", Env: "LOOM_UPSTREAM_URL", Usage: "base URL | of the engine"},
		{Name: "max-body-bytes", Env: "LOOM_MAX_BODY_BYTES", Default: "33554432", Usage: "largest body"},
	}
	doc := "# t\n<!-- flags: upstream-* -->\nstale\n<!-- end flags -->\ntext kept\n<!-- flags: addr max-* -->\n<!-- end flags -->\n"
	got, err := renderConfigurationDoc(doc, flags)
	if err != nil {
		t.Fatal(err)
	}
	want := "# t\n<!-- flags: upstream-* -->\n" + tableHead +
		"| `--upstream-url` | `LOOM_UPSTREAM_URL` |  | base URL \\| of the engine |\n" +
		"<!-- end flags -->\ntext kept\n<!-- flags: addr max-* -->\n" + tableHead +
		"| `--addr` | `LOOM_ADDR` | `127.0.0.1:8080` | address to listen on |\n" +
		"| `--max-body-bytes` | `LOOM_MAX_BODY_BYTES` | `33554432` (32 MiB) | largest body |\n" +
		"<!-- end flags -->\n"
	if got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	flags = append(flags, flagHelp{Name: "fake-flag", Env: "LOOM_FAKE_FLAG"})
	if _, err := renderConfigurationDoc(doc, flags); err == nil || !strings.Contains(err.Error(), "--fake-flag") {
		t.Errorf("a flag no table claims: error %v, want one naming --fake-flag", err)
	}
	if _, err := renderConfigurationDoc("<!-- flags: * -->\n", flags); err == nil {
		t.Error("a table without its end marker was accepted")
	}
}

const (
	flagsBegin = "<!-- flags: "
	flagsEnd   = "<!-- end flags -->"
	tableHead  = "| flag | variable | default | meaning |\n|---|---|---|---|\n"
)

// renderConfigurationDoc rewrites every flag table of doc: the lines
// between "<!-- flags: PATTERN... -->" and "<!-- end flags -->" become a
// table of the flags whose names match one of the patterns (path.Match)
// and no earlier table's. Everything outside the markers is kept. A flag
// no table claims is an error.
func renderConfigurationDoc(doc string, flags []flagHelp) (string, error) {
	placed := make(map[string]bool)
	var out strings.Builder
	lines := strings.SplitAfter(doc, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		spec, ok := strings.CutPrefix(strings.TrimSpace(line), flagsBegin)
		if !ok {
			continue
		}
		spec, ok = strings.CutSuffix(spec, "-->")
		if !ok {
			return "", fmt.Errorf("line %d: %q does not end with -->", i+1, line)
		}
		patterns := strings.Fields(spec)
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != flagsEnd {
			end++
		}
		if end == len(lines) {
			return "", fmt.Errorf("line %d: the flag table has no %s", i+1, flagsEnd)
		}
		out.WriteString(tableHead)
		for _, f := range flags {
			if placed[f.Name] || !matchAny(patterns, f.Name) {
				continue
			}
			placed[f.Name] = true
			out.WriteString(flagRow(f))
		}
		out.WriteString(lines[end])
		i = end
	}
	var missing []string
	for _, f := range flags {
		if !placed[f.Name] {
			missing = append(missing, "--"+f.Name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("docs/configuration.md has no table for %s: add the flag to the patterns of a %q marker", strings.Join(missing, ", "), flagsBegin)
	}
	return out.String(), nil
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func flagRow(f flagHelp) string {
	def := ""
	if f.Default != "" {
		def = "`" + f.Default + "`"
		if strings.HasSuffix(f.Name, "-bytes") {
			if n, err := strconv.ParseInt(f.Default, 10, 64); err == nil && n > 0 {
				def += binarySize(n)
			}
		}
	}
	usage := strings.NewReplacer("|", `\|`, "*", `\*`, "<", `\<`).Replace(f.Usage)
	return fmt.Sprintf("| `--%s` | `%s` | %s | %s |\n", f.Name, f.Env, def, usage)
}

// binarySize is " (N MiB)" or " (N KiB)" for a size that is a whole
// number of them.
func binarySize(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf(" (%d MiB)", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf(" (%d KiB)", n>>10)
	}
	return ""
}

// firstDifference shows the first line where two texts differ.
func firstDifference(old, new string) string {
	a, b := strings.Split(old, "\n"), strings.Split(new, "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n\tthe file:  %s\n\tgenerated: %s", i+1, x, y)
		}
	}
	return ""
}
