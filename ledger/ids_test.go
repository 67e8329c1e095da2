package ledger

import (
	"bytes"
	"testing"
)

// Issue 14: ids made one after another sort one after another, so their
// index takes them at its right edge.
func TestNewIDIsVersion7AndOrdered(t *testing.T) {
	prev := NewID()
	for range 10000 {
		id := NewID()
		if id.Version() != 7 {
			t.Fatalf("version %d, want 7", id.Version())
		}
		if bytes.Compare(id[:], prev[:]) <= 0 {
			t.Fatalf("%s not after %s", id, prev)
		}
		prev = id
	}
}
