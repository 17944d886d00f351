package sqlite

import (
	"errors"
	"testing"
)

// TestReadApart: the read's error comes back, and its panic is raised in
// the caller, as if it had run there.
func TestReadApart(t *testing.T) {
	boom := errors.New("boom")
	if err := readApart(func() error { return boom }); err != boom {
		t.Errorf("error: %v, want boom", err)
	}
	if err := readApart(func() error { return nil }); err != nil {
		t.Errorf("no error: %v", err)
	}
	defer func() {
		if p := recover(); p != "read panicked" {
			t.Errorf("recovered %v, want the read's panic", p)
		}
	}()
	readApart(func() error { panic("read panicked") })
	t.Error("a panicking read returned")
}
