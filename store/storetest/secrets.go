package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/loomgate/loom/store"
)

// RunShared runs the part of the suite that needs several handles on one
// database, as replicas and restarts have: newDatabase creates a fresh,
// empty database for the test it is given and returns a function that
// opens a new handle on it each time it is called. The suite closes the
// handles it opens.
func RunShared(t *testing.T, newDatabase func(t *testing.T) (open func() (store.Store, error))) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func() (store.Store, error))
	}{
		{"SecretSharedAndKept", testSecretSharedAndKept},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newDatabase(t))
		})
	}
}

// secretValue is a distinct value per caller, with the bytes a text column
// would mangle (a NUL, invalid UTF-8).
func secretValue(caller int) []byte {
	return append([]byte{0, 0xff, 0xfe, byte(caller)}, fmt.Sprintf("caller %d", caller)...)
}

// getOrCreateConcurrently has callers goroutines each call
// GetOrCreateSecret(name) with a value of its own, spread over stores,
// and returns the values they got.
func getOrCreateConcurrently(t *testing.T, stores []store.Store, name string, callers int) [][]byte {
	t.Helper()
	got := make([][]byte, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			got[i], errs[i] = stores[i%len(stores)].GetOrCreateSecret(ctx, name, secretValue(i))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	return got
}

// checkOneOf fails unless every value in got is the same, and one of the
// callers' values.
func checkOneOf(t *testing.T, got [][]byte, callers int) []byte {
	t.Helper()
	first := got[0]
	for i, v := range got {
		if !bytes.Equal(v, first) {
			t.Fatalf("caller %d got %q, caller 0 got %q: callers disagree", i, v, first)
		}
	}
	for i := range callers {
		if bytes.Equal(first, secretValue(i)) {
			return first
		}
	}
	t.Fatalf("the secret %q is no caller's value", first)
	return nil
}

// testSecret: concurrent callers of GetOrCreateSecret on one store all get
// the value of one of them, byte for byte; a later caller gets it too, not
// its own; another name is a secret of its own.
func testSecret(t *testing.T, s store.Store) {
	const callers = 8
	kept := checkOneOf(t, getOrCreateConcurrently(t, []store.Store{s}, "key", callers), callers)
	again, err := s.GetOrCreateSecret(ctx, "key", []byte("a latecomer's value"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, kept) {
		t.Errorf("a later call got %q, want the stored %q", again, kept)
	}
	other, err := s.GetOrCreateSecret(ctx, "other", []byte("other value"))
	if err != nil {
		t.Fatal(err)
	}
	if string(other) != "other value" {
		t.Errorf("another name got %q, want its own value", other)
	}
}

// testSecretSharedAndKept: callers on two handles of one database at once
// (two replicas starting together) agree on one value, and a handle
// opened after both were closed (a restart) gets it again.
func testSecretSharedAndKept(t *testing.T, open func() (store.Store, error)) {
	const callers = 8
	var stores []store.Store
	closed := false
	t.Cleanup(func() {
		if !closed {
			for _, s := range stores {
				s.Close()
			}
		}
	})
	for range 2 {
		s, err := open()
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	kept := checkOneOf(t, getOrCreateConcurrently(t, stores, "key", callers), callers)
	closed = true
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.GetOrCreateSecret(ctx, "key", []byte("after the restart"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, kept) {
		t.Errorf("after a reopen got %q, want %q", got, kept)
	}
}
