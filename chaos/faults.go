package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Process names of the run: two replicas serving GraphQL and a worker.
const (
	ServeA = "serve-a"
	ServeB = "serve-b"
	Worker = "worker"
)

// processNames lists the processes a kill may hit, in a fixed order (the
// schedule indexes it).
var processNames = []string{ServeA, ServeB, Worker}

// FaultKind says what a fault does.
type FaultKind int

const (
	// Kill sends SIGKILL to one process, which is started again after Down.
	Kill FaultKind = iota
	// PGRestart crash-restarts PostgreSQL: `pg_ctl restart -m immediate`.
	PGRestart
)

// Fault is one scheduled fault, At after the load starts.
type Fault struct {
	At      time.Duration
	Kind    FaultKind
	Process string        // Kill: the process hit
	Down    time.Duration // Kill: how long the process stays down, 0-1s
}

// String describes the fault for the progress lines.
func (f Fault) String() string {
	if f.Kind == PGRestart {
		return "postgres crash restart"
	}
	return fmt.Sprintf("kill -9 %s (down %s)", f.Process, f.Down.Round(time.Millisecond))
}

// Schedule returns the faults of a run, in time order, drawn from rng: kills
// separated by gaps uniform in [killEvery/2, 3*killEvery/2] until duration,
// and restarts PostgreSQL crash restarts, the i-th at a uniform moment in the
// middle half of the i-th of restarts equal slices of duration (so none
// lands at the very start or end of the load). The same rng state gives the
// same schedule.
func Schedule(rng *rand.Rand, duration, killEvery time.Duration, restarts int) []Fault {
	var out []Fault
	for at := jitter(rng, killEvery); at < duration; at += jitter(rng, killEvery) {
		out = append(out, Fault{At: at, Kind: Kill, Process: processNames[rng.IntN(len(processNames))],
			Down: time.Duration(rng.Int64N(int64(time.Second)))})
	}
	slice := duration / time.Duration(restarts)
	for i := range restarts {
		at := time.Duration(i)*slice + slice/4 + time.Duration(rng.Int64N(int64(slice/2)))
		out = append(out, Fault{At: at, Kind: PGRestart})
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out
}

// jitter returns a duration uniform in [mean/2, 3*mean/2).
func jitter(rng *rand.Rand, mean time.Duration) time.Duration {
	return mean/2 + time.Duration(rng.Int64N(int64(mean)))
}
