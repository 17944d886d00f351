package harmony

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The golden vectors in testdata/ come from openai/harmony v0.0.8 (see
// testdata/SOURCE.md and testdata/README.md).

type renderCase struct {
	Name         string `json:"name"`
	Op           string `json:"op"`
	Conversation struct {
		Messages []Message `json:"messages"`
	} `json:"conversation"`
	NextTurnRole string `json:"next_turn_role"`
	Config       *struct {
		AutoDropAnalysis *bool `json:"auto_drop_analysis"`
	} `json:"config"`
	ExpectedRendered  string   `json:"expected_rendered"`
	ExpectedTokens    []uint32 `json:"expected_tokens"`
	ReferenceCompares string   `json:"reference_compares"`
	Provenance        string   `json:"provenance"`
}

// options maps the case's config to ours: the Rust tests that pass no config
// (null) render everything, auto_drop_analysis=true is the reference rule.
func (c *renderCase) options() *RenderOptions {
	if c.Config != nil && c.Config.AutoDropAnalysis != nil && *c.Config.AutoDropAnalysis {
		return &RenderOptions{Analysis: DropAnalysisReference}
	}
	return &RenderOptions{Analysis: KeepAnalysis}
}

// render runs the case's operation, as ids and as text.
func (c *renderCase) render() ([]uint32, string, error) {
	msgs := c.Conversation.Messages
	opts := c.options()
	next := Role(c.NextTurnRole)
	if next == "" {
		next = RoleAssistant
	}
	var ids []uint32
	var text string
	var err1, err2 error
	switch c.Op {
	case "render":
		ids, err1 = RenderMessage(msgs[0])
		text, err2 = RenderMessageText(msgs[0])
	case "render_conversation":
		ids, err1 = RenderConversation(msgs, opts)
		text, err2 = RenderConversationText(msgs, opts)
	case "render_conversation_for_completion":
		ids, err1 = RenderForCompletion(msgs, next, opts)
		text, err2 = RenderForCompletionText(msgs, next, opts)
	case "render_conversation_for_training":
		ids, err1 = RenderForTraining(msgs, opts)
		text, err2 = RenderForTrainingText(msgs, opts)
	default:
		return nil, "", os.ErrInvalid
	}
	if err1 != nil {
		return nil, "", err1
	}
	return ids, text, err2
}

func loadJSON[T any](t testing.TB, path string) T {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func caseFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cases", dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// goldenText reads a test-data file the way the reference suite does: CRLF
// to LF, trailing whitespace stripped.
func goldenText(t testing.TB, name string) (string, bool) {
	data, err := os.ReadFile(filepath.Join("testdata", "test-data", name))
	if err != nil {
		return "", false
	}
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return strings.TrimRight(s, " \t\r\n"), true
}

func TestRenderVectors(t *testing.T) {
	files := caseFiles(t, "render")
	if len(files) != 25 {
		t.Fatalf("found %d render cases, want 25", len(files))
	}
	goldens := 0
	for _, f := range files {
		c := loadJSON[renderCase](t, f)
		t.Run(c.Name, func(t *testing.T) {
			ids, text, err := c.render()
			if err != nil {
				t.Fatal(err)
			}
			if text != c.ExpectedRendered {
				t.Errorf("text mismatch\n got: %q\nwant: %q", text, c.ExpectedRendered)
			}
			if !slices.Equal(ids, c.ExpectedTokens) {
				t.Errorf("tokens mismatch (%d vs %d)\n got: %v\nwant: %v", len(ids), len(c.ExpectedTokens), ids, c.ExpectedTokens)
			}
			// Our special-token layer must reproduce the vector's own
			// encoding of the expected text.
			enc, err := EncodeWithSpecial(c.ExpectedRendered)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(enc, c.ExpectedTokens) {
				t.Errorf("EncodeWithSpecial(expected_rendered) differs from expected_tokens")
			}
			if dec, err := Decode(ids); err != nil || dec != text {
				t.Errorf("Decode(ids) = %q, %v; want the text rendering", dec, err)
			}
			if g, ok := goldenText(t, "test_"+c.Name+".txt"); ok {
				goldens++
				if g != strings.TrimRight(c.ExpectedRendered, " \t\r\n") {
					t.Errorf("golden file test_%s.txt differs from expected_rendered", c.Name)
				}
			}
		})
	}
	if goldens < 18 {
		t.Errorf("only %d render cases matched a golden file", goldens)
	}
}

// TestRenderTokenCounts pins the prompt sizes quoted in the design notes.
func TestRenderTokenCounts(t *testing.T) {
	for name, want := range map[string]int{
		"render_functions_with_parameters": 364,
		"browser_and_python_tool":          597,
		"simple_convo":                     64,
	} {
		c := loadJSON[renderCase](t, filepath.Join("testdata", "cases", "render", name+".json"))
		ids, _, err := c.render()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != want {
			t.Errorf("%s: %d tokens, want %d", name, len(ids), want)
		}
	}
}

// TestBuilders builds the vectors' inputs with this package's constructors
// (the "builder" field of each case) and checks they render the same.
func TestBuilders(t *testing.T) {
	const date = "2025-06-28"
	weather := ToolDescription{
		Name:        "lookup_weather",
		Description: "Use this tool to lookup the weather in a given location. Call it with the parameter 'location', can be any textual description of a location.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`),
	}
	withDate := func(s SystemContent) SystemContent { s.ConversationStartDate = date; return s }
	tests := []struct {
		name string
		msgs []Message
	}{
		{"simple_convo", []Message{
			{Author: Author{Role: RoleSystem}, Content: []Content{NewSystemContent()}},
			TextMessage(RoleUser, "What is 2 + 2?"),
		}},
		{"no_tools", []Message{
			{Author: Author{Role: RoleSystem}, Content: []Content{withDate(NewSystemContent())}},
		}},
		{"browser_tool_only", func() []Message {
			s := withDate(NewSystemContent())
			s.Tools = []ToolNamespace{BrowserNamespace()}
			return []Message{{Author: Author{Role: RoleSystem}, Content: []Content{s}}}
		}()},
		{"browser_and_python_tool", func() []Message {
			s := withDate(NewSystemContent())
			// Given out of order: rendering sorts namespaces by name.
			s.Tools = []ToolNamespace{PythonNamespace(), BrowserNamespace()}
			return []Message{{Author: Author{Role: RoleSystem}, Content: []Content{&s}}}
		}()},
		{"browser_and_function_tool", func() []Message {
			s := withDate(NewSystemContent())
			s.Tools = []ToolNamespace{BrowserNamespace()}
			return []Message{
				{Author: Author{Role: RoleSystem}, Content: []Content{s}},
				{Author: Author{Role: RoleDeveloper}, Content: []Content{DeveloperContent{Tools: []ToolNamespace{FunctionsNamespace(weather)}}}},
			}
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadJSON[renderCase](t, filepath.Join("testdata", "cases", "render", tt.name+".json"))
			got, err := RenderForCompletionText(tt.msgs, RoleAssistant, c.options())
			if err != nil {
				t.Fatal(err)
			}
			if got != c.ExpectedRendered {
				t.Errorf("builder rendering differs\n got: %q\nwant: %q", got, c.ExpectedRendered)
			}
		})
	}
	// The default system content equals the vector's fully spelled-out one.
	c := loadJSON[renderCase](t, filepath.Join("testdata", "cases", "render", "simple_convo.json"))
	if got := c.Conversation.Messages[0].Content[0]; !reflect.DeepEqual(got, NewSystemContent()) {
		t.Errorf("NewSystemContent() = %#v\nvector has %#v", NewSystemContent(), got)
	}
}

type parseCase struct {
	Name                       string          `json:"name"`
	Role                       *Role           `json:"role"`
	Strict                     bool            `json:"strict"`
	Tokens                     []uint32        `json:"tokens"`
	CallProcessEOS             bool            `json:"call_process_eos"`
	ExpectedMessages           *[]Message      `json:"expected_messages"`
	ExpectedErrorContains      *string         `json:"expected_error_contains"`
	ExpectedMessageCount       *int            `json:"expected_message_count"`
	ExpectedSecondMessage      *Message        `json:"expected_second_message"`
	ExpectedCurrentContent     *string         `json:"expected_current_content"`
	ExpectedConcatenatedDeltas *string         `json:"expected_concatenated_deltas"`
	ConcatDeltasEqualContent   bool            `json:"expected_concatenated_deltas_equal_content"`
	ThenProcessOrdinaryText    *string         `json:"then_process_ordinary_text"`
	ThenExpectedLastDelta      *string         `json:"then_expected_last_delta"`
	ThenExpectedCurrentContent *string         `json:"then_expected_current_content"`
	AfterEOSLastDelta          json.RawMessage `json:"after_eos_last_delta"`
	AfterEOSCurrentContent     *string         `json:"after_eos_current_content"`
	PerTokenChecks             string          `json:"per_token_checks"`
}

func (c *parseCase) options() *ParseOptions {
	o := &ParseOptions{Lenient: !c.Strict}
	if c.Role != nil {
		o.Role = *c.Role
	}
	return o
}

// deltaLog collects deltas per message and checks that they add up to each
// completed message's content.
type deltaLog struct {
	cur  strings.Builder // deltas of the message in progress
	done []string        // deltas of each completed message
	all  strings.Builder // every delta
}

func (d *deltaLog) after(p *Parser, before int) {
	d.cur.Write(p.Delta())
	d.all.Write(p.Delta())
	if len(p.Messages()) > before {
		d.done = append(d.done, d.cur.String())
		d.cur.Reset()
	}
}

func (d *deltaLog) check(t testing.TB, msgs []Message) {
	t.Helper()
	if len(d.done) != len(msgs) {
		t.Fatalf("saw %d message boundaries, parser has %d messages", len(d.done), len(msgs))
	}
	for i, m := range msgs {
		if d.done[i] != m.Text() {
			t.Errorf("message %d: deltas %q != content %q", i, d.done[i], m.Text())
		}
	}
}

func TestParseVectors(t *testing.T) {
	files := caseFiles(t, "parse")
	if len(files) != 27 {
		t.Fatalf("found %d parse cases, want 27", len(files))
	}
	for _, f := range files {
		c := loadJSON[parseCase](t, f)
		t.Run(c.Name, func(t *testing.T) {
			p := NewParser(c.options())
			var log deltaLog
			var err error
			for i, id := range c.Tokens {
				before := len(p.Messages())
				if err = p.Process(id); err != nil {
					break
				}
				log.after(p, before)
				if c.Name == "utf8_waits_for_multitoken_emoji" {
					checkEmojiSteps(t, p, i)
				}
			}
			if err == nil && c.CallProcessEOS {
				before := len(p.Messages())
				err = p.ProcessEOS()
				if err == nil {
					log.after(p, before)
				}
			}
			if c.ExpectedErrorContains != nil {
				if err == nil {
					t.Fatalf("no error; want one containing %q", *c.ExpectedErrorContains)
				}
				if !strings.Contains(err.Error(), *c.ExpectedErrorContains) {
					t.Fatalf("error %q does not contain %q", err, *c.ExpectedErrorContains)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			msgs := p.Messages()
			log.check(t, msgs)
			checkParsed(t, &c, p, msgs, log.all.String())
		})
	}
}

func checkParsed(t *testing.T, c *parseCase, p *Parser, msgs []Message, allDeltas string) {
	t.Helper()
	if c.ExpectedMessages != nil && !reflect.DeepEqual(msgs, *c.ExpectedMessages) && (len(msgs) != 0 || len(*c.ExpectedMessages) != 0) {
		t.Errorf("messages differ\n got: %s\nwant: %s", mustJSON(msgs), mustJSON(*c.ExpectedMessages))
	}
	if c.ExpectedMessageCount != nil && len(msgs) != *c.ExpectedMessageCount {
		t.Errorf("%d messages, want %d", len(msgs), *c.ExpectedMessageCount)
	}
	if c.ExpectedSecondMessage != nil && (len(msgs) < 2 || !reflect.DeepEqual(msgs[1], *c.ExpectedSecondMessage)) {
		t.Errorf("second message = %s, want %s", mustJSON(msgs), mustJSON(*c.ExpectedSecondMessage))
	}
	if c.ExpectedCurrentContent != nil && p.CurrentContent() != *c.ExpectedCurrentContent {
		t.Errorf("current content %q, want %q", p.CurrentContent(), *c.ExpectedCurrentContent)
	}
	if c.ExpectedConcatenatedDeltas != nil && allDeltas != *c.ExpectedConcatenatedDeltas {
		t.Errorf("concatenated deltas %q, want %q", allDeltas, *c.ExpectedConcatenatedDeltas)
	}
	if c.ConcatDeltasEqualContent {
		var content strings.Builder
		for _, m := range msgs {
			content.WriteString(m.Text())
		}
		if allDeltas != content.String() {
			t.Errorf("concatenated deltas %q != content %q", allDeltas, content.String())
		}
	}
	if c.ThenProcessOrdinaryText != nil {
		ids, err := Encode(*c.ThenProcessOrdinaryText)
		if err != nil || len(ids) != 1 {
			t.Fatalf("encode %q: %v %v", *c.ThenProcessOrdinaryText, ids, err)
		}
		if err := p.Process(ids[0]); err != nil {
			t.Fatal(err)
		}
		if got := string(p.Delta()); c.ThenExpectedLastDelta != nil && got != *c.ThenExpectedLastDelta {
			t.Errorf("then: delta %q, want %q", got, *c.ThenExpectedLastDelta)
		}
		if got := p.CurrentContent(); c.ThenExpectedCurrentContent != nil && got != *c.ThenExpectedCurrentContent {
			t.Errorf("then: current content %q, want %q", got, *c.ThenExpectedCurrentContent)
		}
	}
	if string(c.AfterEOSLastDelta) == "null" && len(p.Delta()) != 0 {
		t.Errorf("after EOS: delta %q, want none", p.Delta())
	}
	if c.AfterEOSCurrentContent != nil && p.CurrentContent() != *c.AfterEOSCurrentContent {
		t.Errorf("after EOS: current content %q, want %q", p.CurrentContent(), *c.AfterEOSCurrentContent)
	}
}

// checkEmojiSteps is the prose per_token_checks of
// utf8_waits_for_multitoken_emoji: 💖 is two tokens; the first gives no
// delta and no content, the second the whole character.
func checkEmojiSteps(t *testing.T, p *Parser, i int) {
	switch i {
	case 3:
		if len(p.Delta()) != 0 || p.CurrentContent() != "" {
			t.Errorf("after 1st emoji token: delta %q content %q, want none", p.Delta(), p.CurrentContent())
		}
	case 4:
		if string(p.Delta()) != "💖" || p.CurrentContent() != "💖" {
			t.Errorf("after 2nd emoji token: delta %q content %q, want 💖", p.Delta(), p.CurrentContent())
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestParseVectorsAsText feeds every parse case whose ids are in the
// vocabulary as text, with special tokens written literally, in chunks of
// several sizes (so that special tokens and characters are split across
// chunks), and expects the same messages as token-by-token parsing.
func TestParseVectorsAsText(t *testing.T) {
	for _, f := range caseFiles(t, "parse") {
		c := loadJSON[parseCase](t, f)
		text, err := Decode(c.Tokens)
		if err != nil {
			continue // invalid_token_id_replaced_on_eos has no text form
		}
		for _, chunk := range []int{1, 2, 3, 7, 1 << 20} {
			p := NewParser(c.options())
			var log deltaLog
			var perr error
			for s := text; len(s) > 0 && perr == nil; {
				part := s[:min(chunk, len(s))]
				s = s[len(part):]
				for len(part) > 0 {
					before := len(p.Messages())
					var n int
					n, perr = p.ProcessText(part)
					if perr != nil {
						break
					}
					log.after(p, before)
					part = part[n:]
				}
			}
			if perr == nil && c.CallProcessEOS {
				before := len(p.Messages())
				if perr = p.ProcessEOS(); perr == nil {
					log.after(p, before)
				}
			}
			if c.ExpectedErrorContains != nil {
				if perr == nil {
					t.Errorf("%s/chunk %d: no error", c.Name, chunk)
				}
				continue
			}
			if perr != nil {
				t.Errorf("%s/chunk %d: %v", c.Name, chunk, perr)
				continue
			}
			log.check(t, p.Messages())
			if c.ExpectedMessages != nil && len(*c.ExpectedMessages) > 0 && !reflect.DeepEqual(p.Messages(), *c.ExpectedMessages) {
				t.Errorf("%s/chunk %d: messages differ\n got: %s\nwant: %s", c.Name, chunk, mustJSON(p.Messages()), mustJSON(*c.ExpectedMessages))
			}
		}
	}
}

// TestDerivedVectors runs the three cases written from the reference source
// without a reference run. All three match; if one ever stops matching the
// test must say why here rather than skip.
func TestDerivedVectors(t *testing.T) {
	files := caseFiles(t, "derived")
	if len(files) != 3 {
		t.Fatalf("found %d derived cases, want 3", len(files))
	}
	for _, f := range files {
		c := loadJSON[renderCase](t, f)
		t.Run(c.Name, func(t *testing.T) {
			ids, text, err := c.render()
			if err != nil {
				t.Fatal(err)
			}
			if text != c.ExpectedRendered {
				t.Errorf("text mismatch\n got: %q\nwant: %q", text, c.ExpectedRendered)
			}
			if !slices.Equal(ids, c.ExpectedTokens) {
				t.Errorf("tokens mismatch\n got: %v\nwant: %v", ids, c.ExpectedTokens)
			}
			switch c.Name {
			case "derived_empty_object_params":
				// The HF chat template would write "() => any"; we follow the
				// reference renderer, which writes an empty object.
				t.Log("empty properties render as (_: {\\n}) => any (reference), not () => any (HF template)")
				if strings.Contains(text, "() => any") {
					t.Error("empty-object tool rendered like the HF template")
				}
			}
		})
	}
}
