package mockllm

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseScript(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []*turn
		wantErr string
	}{
		{name: "no directives", text: "just a question\n# A heading\n#1 item", want: nil},
		{name: "say lines and reasoning", text: "intro\n  #say one\n#SAY two  \n#reason why",
			want: []*turn{{say: []string{"one", "two"}, hasSay: true, reason: []string{"why"}, cut: -1, stall: -1}}},
		{name: "empty say", text: "#say", want: []*turn{{say: []string{""}, hasSay: true, cut: -1, stall: -1}}},
		{name: "calls", text: "#call f {\"a\": 1}\n#call\tg\n#callid id7 h [1]",
			want: []*turn{{calls: []callSpec{{name: "f", arguments: `{"a": 1}`}, {name: "g", arguments: "{}"}, {id: "id7", name: "h", arguments: "[1]"}}, cut: -1, stall: -1}}},
		{name: "failures", text: "#fail 503 busy now\n#flaky 2 429\n#cut 3\n#stall\n#garbage",
			want: []*turn{{failStatus: 503, failMessage: "busy now", flakyTimes: 2, flakyStatus: 429, cut: 3, stall: 0, garbage: true}}},
		{name: "timing and usage", text: "#delay 5ms\n#latency 1s\n#cached 12\n#tokens 3\n#finish content_filter\n#stall 4",
			want: []*turn{{delay: 5 * time.Millisecond, hasDelay: true, latency: time.Second, hasLatency: true,
				cached: 12, tokens: 3, hasTokens: true, finish: "content_filter", cut: -1, stall: 4}}},
		{name: "turns", text: "#call f\n#then\n#say done",
			want: []*turn{{calls: []callSpec{{name: "f", arguments: "{}"}}, cut: -1, stall: -1}, {say: []string{"done"}, hasSay: true, cut: -1, stall: -1}}},
		{name: "harmony directives", text: "#preamble Let me check.\n#callon analysis f {\"x\":1}\n#builtin python print(1)\n#builtin browser.search {\"query\":\"q\"}",
			want: []*turn{{preamble: []string{"Let me check."}, calls: []callSpec{
				{name: "f", arguments: `{"x":1}`, channel: "analysis"},
				{name: "python", arguments: "print(1)", channel: "analysis", builtin: true},
				{name: "browser.search", arguments: `{"query":"q"}`, channel: "analysis", builtin: true},
			}, cut: -1, stall: -1}}},
		{name: "namespaced call", text: "#callns docs.search {\"q\":\"x\"}\n#callns a-b.c",
			want: []*turn{{calls: []callSpec{
				{name: "docs.search", arguments: `{"q":"x"}`, namespaced: true},
				{name: "a-b.c", arguments: "{}", namespaced: true},
			}, cut: -1, stall: -1}}},
		{name: "callns without a namespace", text: "#callns search", wantErr: "#callns <namespace>.<tool>"},
		{name: "callns into functions", text: "#callns functions.f", wantErr: "#callns <namespace>.<tool>"},
		{name: "callon bad channel", text: "#callon final f", wantErr: "#callon analysis|commentary"},
		{name: "builtin unknown", text: "#builtin shell ls", wantErr: "#builtin python"},
		{name: "unknown", text: "#sya hi", wantErr: "line 1: #sya: unknown directive"},
		{name: "bad status", text: "#fail 200", wantErr: "400-599"},
		{name: "bad duration", text: "\n#delay soon", wantErr: "line 2: #delay"},
		{name: "call without name", text: "#call", wantErr: "#call <name>"},
		{name: "negative", text: "#cut -1", wantErr: "non-negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseScript(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	if n := countTokens("  a bb\tccc\n d  "); n != 4 {
		t.Errorf("countTokens = %d", n)
	}
	tests := []struct {
		s    string
		n    int
		want string
		cut  bool
	}{
		{"a b c", 2, "a b", true},
		{"a b c", 3, "a b c", false},
		{"a b c  ", 3, "a b c  ", false},
		{"a b", 0, "", true},
		{"", 0, "", false},
		{"  x", 0, "", true},
	}
	for _, tt := range tests {
		got, cut := truncateTokens(tt.s, tt.n)
		if got != tt.want || cut != tt.cut {
			t.Errorf("truncateTokens(%q, %d) = %q, %v; want %q, %v", tt.s, tt.n, got, cut, tt.want, tt.cut)
		}
	}
	if got := splitRunes("héllo wörld", 4); !reflect.DeepEqual(got, []string{"héll", "o wö", "rld"}) {
		t.Errorf("splitRunes = %q", got)
	}
	if got := numberedWords(3); got != "w1 w2 w3" {
		t.Errorf("numberedWords = %q", got)
	}
}
