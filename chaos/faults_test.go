package chaos

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A seed replays the run's decisions (issue 10, `make chaos`): the same
// seed gives the same fault schedule, accounts and writes; the schedule
// keeps its bounds.
func TestScheduleReplaysFromSeed(t *testing.T) {
	t.Parallel()
	const duration, every = 60 * time.Second, 4 * time.Second
	sched := func(seed uint64) []Fault { return Schedule(rand.New(rand.NewPCG(seed, 0)), duration, every, 3) }
	a := sched(42)
	require.Equal(t, a, sched(42))
	require.NotEqual(t, a, sched(43))

	restarts := 0
	var last time.Duration
	for _, f := range a {
		require.GreaterOrEqual(t, f.At, last, "in time order")
		require.Less(t, f.At, duration)
		last = f.At
		switch f.Kind {
		case PGRestart:
			slice := duration / 3
			in := f.At - time.Duration(restarts)*slice
			require.True(t, in >= slice/4 && in < 3*slice/4, "restart %d at %s: in the middle half of its slice", restarts, f.At)
			restarts++
		case Kill:
			require.Contains(t, processNames, f.Process)
			require.Less(t, f.Down, time.Second)
		}
	}
	require.Equal(t, 3, restarts)
	kills := slices.DeleteFunc(slices.Clone(a), func(f Fault) bool { return f.Kind != Kill })
	require.GreaterOrEqual(t, len(kills), int(duration/(3*every/2))-1)
	for i := 1; i < len(kills); i++ {
		gap := kills[i].At - kills[i-1].At
		require.True(t, gap >= every/2 && gap < 3*every/2, "gap %s", gap)
	}
}

func TestLoadPlanReplaysFromSeed(t *testing.T) {
	t.Parallel()
	plan := func(seed int64) []string {
		accts := accountIDs(rand.New(rand.NewPCG(uint64(seed), 1)), 4)
		l := &loader{id: 0, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 100)), owned: accts[:2], revs: map[string]int{}}
		var out []string
		for range 50 {
			w := l.next()
			w.Version = 1 // acknowledged (updates too: only inserts are updated later)
			if w.update {
				w.Version = 2
			}
			l.done(w)
			out = append(out, w.Namespace+" "+w.Key+" "+w.IdemKey+" "+string(w.Value))
		}
		return out
	}
	a := plan(7)
	require.Equal(t, a, plan(7))
	require.NotEqual(t, a, plan(8))
	require.Contains(t, a[0], AccountNS+" ", "a client opens an account before its first entry")
}
