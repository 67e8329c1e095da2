package turns

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, e, err := ParseLive(p)
	if err != nil {
		panic(err)
	}
	r.got = append(r.got, e.Kind)
}

func entry(kind string) LiveEntry {
	return LiveEntry{Turn: 1, Attempt: 1, Entry: Entry{Seq: 1, Kind: kind}}
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// Issue 14 (liveGate): a turn shorter than the delay publishes none of its
// entries and its commit waits for none; a longer one publishes what it
// held once the delay passes, then each entry as it comes; an attempt
// that fails, or a turn whose commit fails, publishes what it held.
func TestLiveGate(t *testing.T) {
	t.Run("short turn publishes nothing", func(t *testing.T) {
		r := &recorder{}
		g := newLiveGate(r, time.Hour)
		g.begin()
		g.add(7, entry("1"))
		g.add(7, entry("2"))
		require.False(t, g.stop(), "nothing published: the commit waits for nothing")
		g.timeUp() // a timer that fires after the attempt ended opens nothing
		g.drop()
		require.Empty(t, r.list())
	})
	t.Run("long turn streams after the delay", func(t *testing.T) {
		r := &recorder{}
		g := newLiveGate(r, time.Hour)
		g.begin()
		g.add(7, entry("1"))
		g.timeUp()
		g.add(7, entry("2"))
		require.Equal(t, []string{"1", "2"}, r.list())
		require.True(t, g.stop(), "the commit waits for what was published")
		g.drop()
	})
	t.Run("failed attempt publishes what it held", func(t *testing.T) {
		r := &recorder{}
		g := newLiveGate(r, time.Hour)
		g.begin()
		g.add(7, entry("a1"))
		g.begin() // the next attempt
		require.Equal(t, []string{"a1"}, r.list())
		g.add(7, entry("b1"))
		require.True(t, g.stop())
		g.release() // its commit failed
		require.Equal(t, []string{"a1", "b1"}, r.list())
	})
	t.Run("no delay streams at once", func(t *testing.T) {
		r := &recorder{}
		g := newLiveGate(r, -1)
		g.begin()
		g.add(7, entry("1"))
		require.Equal(t, []string{"1"}, r.list())
	})
}
