package mockllm

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The mock has no tokenizer. It counts one token per whitespace-separated
// word: deterministic, easy to predict in a test ("#tokens 5" is five
// tokens), and close enough in spirit to real usage accounting.

// countTokens returns the number of whitespace-separated words in s.
func countTokens(s string) int {
	n := 0
	inWord := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			inWord = false
			continue
		}
		if !inWord {
			n++
			inWord = true
		}
	}
	return n
}

// truncateTokens returns the prefix of s holding its first n words, ending
// right after the n-th word, and whether any word was dropped.
func truncateTokens(s string, n int) (string, bool) {
	words := 0
	inWord := false
	for i, r := range s {
		if unicode.IsSpace(r) {
			inWord = false
			continue
		}
		if !inWord {
			if words == n {
				return strings.TrimRightFunc(s[:i], unicode.IsSpace), true
			}
			words++
			inWord = true
		}
	}
	return s, false
}

// splitRunes cuts s into pieces of at most size runes, the way the stream
// hands out content. An empty s gives no pieces.
func splitRunes(s string, size int) []string {
	var pieces []string
	for len(s) > 0 {
		end, runes := 0, 0
		for end < len(s) && runes < size {
			_, w := utf8.DecodeRuneInString(s[end:])
			end += w
			runes++
		}
		pieces = append(pieces, s[:end])
		s = s[end:]
	}
	return pieces
}
