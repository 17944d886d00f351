package chat

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
)

// conversationItems are the items of the conversations below, by letter,
// as a client sends them; the item's index makes its text its own.
var conversationItems = map[byte]string{
	'u': `{"role":"user","content":"question %[1]d"}`,
	'a': `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %[1]d","annotations":[]}]}`,
	'r': `{"type":"reasoning","id":"rs_%[1]d","summary":[],"content":[{"type":"reasoning_text","text":"thinking %[1]d"}]}`,
	'c': `{"type":"function_call","call_id":"call_%[1]d","name":"f","arguments":"{}"}`,
	'o': `{"type":"function_call_output","call_id":"call_%[1]d","output":"result %[1]d"}`,
}

// inputOf writes the input of a conversation: a first message long enough
// for the decode cache to keep the list, then the items by letter.
func inputOf(letters string) string {
	items := []string{`{"role":"user","content":"` + strings.Repeat("a long first question, ", 16) + `"}`}
	for i := range len(letters) {
		f := conversationItems[letters[i]]
		items = append(items, fmt.Sprintf(f, i))
	}
	return "[" + strings.Join(items, ",") + "]"
}

// decodeInput decodes a request with input through cache, and returns its
// items and what the cache knows of them.
func decodeInput(t testing.TB, cache *responses.DecodeCache, input string) ([]responses.Item, *responses.InputMemo) {
	t.Helper()
	memo := new(responses.InputMemo)
	req, err := responses.DecodeRequestWith([]byte(`{"model":"m","store":false,"input":`+input+`}`), responses.DecodeOptions{Cache: cache, Memo: memo})
	if err != nil {
		t.Fatalf("decode %s: %v", input, err)
	}
	return req.Input.Items, memo
}

// TestMessagesGoOnFromEarlier: the messages of a request whose input
// starts with the items of an earlier one's, written on from the earlier
// request's (kept in the decode cache), are the messages written afresh,
// wherever the two inputs part: within a group of calls folded into one
// message, after reasoning waiting for its message, right after an
// assistant message that a call of the next would have joined.
func TestMessagesGoOnFromEarlier(t *testing.T) {
	earlier := []string{"uaua", "uraucco", "ucoucoa", "urcoa", "uacau", "ua"}
	// What the next request has after the earlier's first k items.
	after := []string{"", "u", "c", "co", "ra", "a", "oa"}
	wentOn := 0
	for _, instructions := range []string{"", "Be brief."} {
		for _, first := range earlier {
			for k := 0; k <= len(first); k++ {
				for _, rest := range after {
					next := first[:k] + rest
					cache := responses.NewDecodeCache(responses.DecodeCacheOptions{MaxBytes: 1 << 20})
					items, memo := decodeInput(t, cache, inputOf(first))
					if _, err := appendMessages([]byte("x"), instructions, items, memo); err != nil {
						t.Fatal(err)
					}
					items, memo = decodeInput(t, cache, inputOf(next))
					want, wantErr := appendMessages(nil, instructions, items, nil)
					got, err := appendMessages(nil, instructions, items, memo)
					if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) {
						t.Errorf("instructions %q, %s then %s: got %s (%v)\nwant %s (%v)", instructions, first, next, got, err, want, wantErr)
					}
					if w := newRenderer([]byte("["), items, memo); w.from > 0 {
						wentOn++
					}
				}
			}
		}
	}
	// Every pair shares at least the long first message and one more
	// item where k > 0: most go on from the earlier request's messages.
	if wentOn == 0 {
		t.Error("no request went on from an earlier one's messages")
	}
}

// TestMessagesKeptOnce: the next turn of a conversation copies the
// messages of every item it shares with the turn before but the last,
// and a request that sends the same input again finds them as they were
// kept.
func TestMessagesKeptOnce(t *testing.T) {
	cache := responses.NewDecodeCache(responses.DecodeCacheOptions{MaxBytes: 1 << 20})
	items, memo := decodeInput(t, cache, inputOf("uauaua"))
	if !memo.Wants(renderingKey{}) {
		t.Fatal("a new input's memo does not want its messages")
	}
	first, err := appendMessages(nil, "", items, memo)
	if err != nil {
		t.Fatal(err)
	}
	if memo.Wants(renderingKey{}) {
		t.Error("the memo still wants the messages once they are kept")
	}
	items, memo = decodeInput(t, cache, inputOf("uauaua"))
	if memo.Wants(renderingKey{}) {
		t.Error("the same input again wants its messages kept again")
	}
	// 7 items: the long first message and six more; the last one is
	// written again.
	if w := newRenderer([]byte("["), items, memo); w.from != 6 {
		t.Errorf("the same input goes on from item %d, want 6", w.from)
	}
	again, err := appendMessages(nil, "", items, memo)
	if err != nil || !bytes.Equal(again, first) {
		t.Errorf("the same input: %s (%v), want %s", again, err, first)
	}

	items, memo = decodeInput(t, cache, inputOf("uauauau"))
	if w := newRenderer([]byte("["), items, memo); w.from != 6 {
		t.Errorf("the next turn goes on from item %d, want 6", w.from)
	}
	if !memo.Wants(renderingKey{}) {
		t.Error("the next turn's memo does not want its messages")
	}
}
