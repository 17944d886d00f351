package integration

import (
	"bytes"
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

// Tests of conversations with the openai npm package and the Agents SDK
// (@openai/agents), run by node (testdata/node/conversations.mjs).

type nodeItem struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	Text string `json:"text"`
}

// runNodeConversations runs conversations.mjs for one case and decodes its
// summary into out.
func runNodeConversations(t *testing.T, h *harness, name string, out any) {
	t.Helper()
	runNodeScript(t, h, "conversations.mjs", name, out)
}

// runNodeScript runs a script of testdata/node that uses the openai npm
// package and the Agents SDK, for one case against h, and decodes the JSON
// summary it prints into out.
func runNodeScript(t *testing.T, h *harness, script, name string, out any) {
	t.Helper()
	for _, pkg := range []string{"openai", filepath.Join("@openai", "agents")} {
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("the npm package %s is not installed (%v): run `npm ci --prefix integration/testdata/node`", pkg, err)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, name)
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "LOOM_BASE_URL="+h.BaseURL, "NO_PROXY=127.0.0.1,localhost", "NODE_NO_WARNINGS=1", "LOOM_UPSTREAM="+h.upstream)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %s: %v\nstderr:\n%s\nstdout:\n%s", script, name, err, stderr.Bytes(), stdout.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node %s %s printed no summary (%v):\n%s\nstderr:\n%s", script, name, err, stdout.Bytes(), stderr.Bytes())
	}
}

// chatTexts is every message of the upstream's last chat request, as
// "role:content".
func chatTexts(t *testing.T, h *harness) string {
	var texts []string
	for _, m := range lastChatRequest(t, h).Messages {
		texts = append(texts, m.Role+":"+string(m.Content))
	}
	return strings.Join(texts, "|")
}

func TestNodeConversation(t *testing.T) {
	h := newHarness(t, nil)
	var out struct {
		Conversation   string            `json:"conversation"`
		Metadata       map[string]string `json:"metadata"`
		RetrievedID    string            `json:"retrievedID"`
		DeleteReturned string            `json:"deleteReturned"`
		Responses      []struct {
			ID, Text, Conversation string
		} `json:"responses"`
		Items []nodeItem `json:"items"`
		Left  []string   `json:"left"`
	}
	runNodeConversations(t, h, "client", &out)
	if out.RetrievedID != out.Conversation || out.Metadata["topic"] != "colours" || out.DeleteReturned != out.Conversation {
		t.Errorf("conversation %q retrieved as %q with %v; item delete returned %q", out.Conversation, out.RetrievedID, out.Metadata, out.DeleteReturned)
	}
	if len(out.Responses) != 2 || out.Responses[0].Text != "noted, teal" || out.Responses[1].Text != "it was teal" ||
		out.Responses[1].Conversation != out.Conversation {
		t.Errorf("responses %+v", out.Responses)
	}
	var got []string
	for _, it := range out.Items {
		got = append(got, it.Role+":"+it.Text)
	}
	want := []string{"user:my favourite colour is teal", "user:#say noted, teal", "assistant:noted, teal",
		"user:#say it was teal\nwhat was my colour?", "assistant:it was teal"}
	if !slices.Equal(got, want) {
		t.Errorf("items\n%q\nwant\n%q", got, want)
	}
	// The second turn's upstream request held the first.
	second := chatTexts(t, h)
	for _, w := range []string{"my favourite colour is teal", "#say noted, teal", "noted, teal"} {
		if !strings.Contains(second, w) {
			t.Errorf("second upstream request lacks %q: %s", w, second)
		}
	}
	if len(out.Items) > 0 && (len(out.Left) != len(out.Items)-1 || slices.Contains(out.Left, out.Items[0].ID)) {
		t.Errorf("after deleting %s the items are %v", out.Items[0].ID, out.Left)
	}
}

func TestAgentsSDKConversation(t *testing.T) {
	h := newHarness(t, nil)
	var out struct {
		Conversation string     `json:"conversation"`
		Outputs      []string   `json:"outputs"`
		Items        []nodeItem `json:"items"`
	}
	runNodeConversations(t, h, "agents", &out)
	if !slices.Equal(out.Outputs, []string{"hello from the agent", "still here"}) {
		t.Errorf("agent outputs %q", out.Outputs)
	}
	var got []string
	for _, it := range out.Items {
		got = append(got, it.Role+":"+it.Text)
	}
	want := []string{"user:#say hello from the agent", "assistant:hello from the agent", "user:#say still here\nwhat did you say?", "assistant:still here"}
	if !slices.Equal(got, want) {
		t.Errorf("conversation items\n%q\nwant\n%q", got, want)
	}
	second := chatTexts(t, h)
	if !strings.Contains(second, "hello from the agent") || !strings.Contains(second, "what did you say?") {
		t.Errorf("the second turn's upstream request lacks the first turn: %s", second)
	}
}
