package engine

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/loomgate/loom/responses"
)

// IncludeEncryptedReasoning is the include[] value that asks for reasoning
// items to carry encrypted_content, so that a client keeping the history
// itself (store false, as Codex does) can hand the reasoning back.
const IncludeEncryptedReasoning = "reasoning.encrypted_content"

// sealAAD binds a sealed blob to its purpose: a blob sealed for something
// else under the same key does not open as reasoning.
var sealAAD = []byte("loom reasoning v1")

// ErrUnsealable is returned for an encrypted_content that loom did not
// seal under its key, or that was altered. The message leads with the
// likely cause, an operator's: a blob from a server with another key.
var ErrUnsealable = errors.New("encrypted_content cannot be opened: it was most likely sealed by a server with a different reasoning key " +
	"(every replica must have the same --reasoning-key, or none, to share the store's), or it was altered")

// Sealer seals reasoning text with authenticated encryption (AES-256-GCM)
// under a key from configuration, so that any replica holding the key can
// open what another sealed, and nobody without it can read or forge it.
type Sealer struct {
	aead cipher.AEAD
	// random marks a key made up by this process: what it seals opens
	// nowhere else, and not after a restart.
	random bool
}

// NewRandomSealer returns a Sealer under a random key, for a server
// without a configured one. The Engine warns, once, the first time a
// request asks for encrypted reasoning under it: that is when the key
// matters (a client that keeps the history itself and may come back to
// another replica or after a restart).
func NewRandomSealer() *Sealer {
	key := make([]byte, 32)
	rand.Read(key)
	s, _ := NewSealer(key)
	s.random = true
	return s
}

// storeKeyName is the name of the default reasoning key among the store's
// secrets (Store.GetOrCreateSecret).
const storeKeyName = "reasoning_key"

// NewStoreSealer returns a Sealer under the store's reasoning key, for a
// server without a configured one: the first engine on a store generates
// it (32 random bytes) and keeps it there, and every other, on any replica
// and after a restart, reads it back, so that what one seals every other
// opens. Whoever can read the store can read the key (as they can the
// stored responses); a configured key (NewSealer) is kept apart.
func NewStoreSealer(ctx context.Context, store Store) (*Sealer, error) {
	key := make([]byte, 32)
	rand.Read(key)
	stored, err := store.GetOrCreateSecret(ctx, storeKeyName, key)
	if err != nil {
		return nil, fmt.Errorf("reasoning key: %w", err)
	}
	return NewSealer(stored)
}

// NewSealer derives a sealing key from secret (any length; it is hashed).
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) == 0 {
		return nil, errors.New("reasoning key is empty")
	}
	key := sha256.Sum256(secret)
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// compactionAAD binds a sealed compaction summary to its purpose: a
// reasoning blob does not open as a summary, nor the reverse.
var compactionAAD = []byte("loom compaction v1")

// Seal returns text sealed as URL-safe base64 of nonce || ciphertext.
func (s *Sealer) Seal(text string) string { return s.seal(text, sealAAD) }

// Open returns the text of a sealed blob, or ErrUnsealable.
func (s *Sealer) Open(blob string) (string, error) { return s.open(blob, sealAAD) }

// SealCompaction seals a compaction summary, as Seal seals reasoning.
func (s *Sealer) SealCompaction(summary string) string { return s.seal(summary, compactionAAD) }

// OpenCompaction returns the summary of a sealed compaction, or
// ErrUnsealable.
func (s *Sealer) OpenCompaction(blob string) (string, error) { return s.open(blob, compactionAAD) }

func (s *Sealer) seal(text string, aad []byte) string {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(text)+s.aead.Overhead())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(text), aad))
}

func (s *Sealer) open(blob string, aad []byte) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(blob)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", ErrUnsealable
	}
	n := s.aead.NonceSize()
	text, err := s.aead.Open(nil, raw[:n], raw[n:], aad)
	if err != nil {
		return "", ErrUnsealable
	}
	return string(text), nil
}

// sealedReasoning reports whether it is a reasoning item whose text is
// sealed (encrypted_content): one openReasoning opens in place.
func sealedReasoning(it *responses.Item) bool {
	if it.Type != responses.ItemReasoning {
		return false
	}
	c := it.ReasoningFields().EncryptedContent
	return c != nil && *c != ""
}

// openReasoning restores the text of reasoning items that carry only
// encrypted_content, so the model sees its earlier reasoning again. A blob
// that does not open is a 400 naming the item of field ("input",
// "items").
func (cr *core) openReasoning(input []responses.Item, field string) error {
	for i := range input {
		it := &input[i]
		if !sealedReasoning(it) {
			continue
		}
		param := fmt.Sprintf("%s[%d].encrypted_content", field, i)
		if cr.opts.Sealer == nil {
			return responses.BadRequest(param, "this server has no reasoning key, so it cannot open encrypted_content")
		}
		text, err := cr.opts.Sealer.Open(*it.ReasoningFields().EncryptedContent)
		if err != nil {
			return responses.BadRequest(param, "%v", err)
		}
		if len(it.Content) == 0 {
			it.Content = []responses.ContentPart{{Type: responses.PartReasoningText, Text: text}}
		}
	}
	return nil
}
