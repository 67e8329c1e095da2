package turns

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// take is what a new turn takes: pending inputs and due firings, in the
// order the handler sees them.
type take struct {
	items []item
	// final: the session's end has come and the turn takes everything
	// pending (E3, E4).
	final bool
	// ended: the end has come and nothing is pending; the session completes
	// with no turn (E5).
	ended bool
	// notBefore: the pending trigger deliveries are held by the debounce
	// until then (G3); no turn now.
	notBefore time.Time
}

// item is one input of a turn: a pending input row, or a firing that the
// claim records as a SCHEDULE input.
type item struct {
	row    *session.Input
	firing *session.Firing
	event  ledger.NewEvent // a firing's schedule.fired event
	at     time.Time       // commit time of the row's event, or the scheduled time
}

func (it item) size() int {
	if it.row != nil {
		return it.row.ByteSize
	}
	return len(it.event.Data)
}

// plan works out the next turn of sess at now (T2-T4, E3-E5, C4-C6) from
// what the claim read of it: its pending inputs p (with their events),
// and taken, the last firing each clock entry had taken. It returns nil
// when no turn is due: no pending input or due firing starts one, and the
// end has not come.
//
// Before the end a turn starts when a pending input of a trigger turns.on
// names (every trigger, without turns.on) or a due firing of an entry it
// names is there; it takes every pending input and the latest due firing of
// each entry, up to maxInputs and maxBytes, and stops before a REQUEST
// input, which runs in a turn of its own (I4). After the end a turn takes
// everything pending, whatever turns.on names, and is final if nothing is
// left over; with nothing pending the session just completes.
func plan(sess *session.Session, cs *action.CompiledSession, p *session.Pending, taken map[string]time.Time,
	events map[uuid.UUID]ledger.Event, now time.Time) *take {
	clk := session.Clock{StartedAt: sess.StartedAt, EndsAt: sess.EndsAt, Taken: taken}
	ended := clk.Ended(now)
	var firings []session.Firing
	if len(cs.Clock) > 0 {
		firings = clk.Due(cs, now)
	}
	starts := ended || p.Starts
	firingStarts := false
	for _, f := range firings {
		firingStarts = firingStarts || f.StartsTurn
	}
	starts = starts || firingStarts
	if !starts {
		return nil
	}
	if !ended && len(p.Commands) > 0 {
		// P5, H3: an answer to an interrupt runs in a turn of its own; the
		// other pending inputs wait for the turn after it (P3).
		items := make([]item, len(p.Commands))
		for i := range p.Commands {
			items[i] = item{row: &p.Commands[i], at: p.Commands[i].DeliveredAt}
		}
		return &take{items: items}
	}
	if !ended && len(p.Messages) > 0 {
		// G3: pending messages run in a turn of their own, at most
		// MaxMessagesPerTurn (and maxInputs), promoted ones first (G2);
		// trigger deliveries wait for the turn after it.
		ms := slices.Clone(p.Messages)
		slices.SortStableFunc(ms, func(a, b session.Input) int {
			switch {
			case a.PromotedAt != nil && b.PromotedAt != nil:
				return b.PromotedAt.Compare(*a.PromotedAt) // the latest promotion first
			case a.PromotedAt != nil:
				return -1
			case b.PromotedAt != nil:
				return 1
			}
			return 0
		})
		ms = ms[:min(len(ms), session.MaxMessagesPerTurn, maxInputs(cs))]
		items := make([]item, len(ms))
		for i := range ms {
			items[i] = item{row: &ms[i], at: ms[i].DeliveredAt}
		}
		return &take{items: items}
	}
	if !ended && !firingStarts && cs.DebounceQuiet > 0 {
		if at := debounced(cs, p.Inputs); now.Before(at) {
			return &take{notBefore: at}
		}
	}
	limit := maxInputs(cs)
	pending := p.Inputs
	if !ended && len(pending) > limit+1 {
		pending = pending[:limit+1]
	}
	items := merge(pending, firings, events)
	if len(items) == 0 {
		return &take{ended: true} // only an end brings a turn with nothing pending
	}
	n := min(len(items), limit)
	if cs.MaxBytes > 0 {
		total := 0
		for i := range n {
			total += items[i].size()
			if total > cs.MaxBytes && i > 0 {
				n = i
				break
			}
		}
	}
	if !ended {
		// I4: a request runs in a turn of its own, so the turn's output is
		// its answer alone: a turn takes the inputs before the first
		// pending request, or, when it comes first, that request alone.
		for i, it := range items[:n] {
			if it.row != nil && it.row.Kind == session.KindRequest {
				n = max(i, 1)
				break
			}
		}
	}
	// After the end, answers are never cut off from the turn (E6): the
	// turn reaches at least to the last pending COMMAND, whatever the
	// limits (the read reached that far).
	for i, it := range items {
		if it.row != nil && it.row.Kind == session.KindCommand {
			n = max(n, i+1)
		}
	}
	return &take{items: items[:n], final: ended && n == len(items)}
}

// debounced is when the pending trigger deliveries become eligible (G3):
// DebounceQuiet after the newest that starts a turn, or DebounceMax after
// the oldest, whichever comes first; zero when none is held (a request
// pending is never held, nor what comes with it).
func debounced(cs *action.CompiledSession, pending []session.Input) time.Time {
	var oldest, newest time.Time
	for _, in := range pending {
		if in.Kind == session.KindRequest {
			return time.Time{}
		}
		if in.Kind != session.KindEvent || !in.StartsTurn {
			continue
		}
		if oldest.IsZero() || in.DeliveredAt.Before(oldest) {
			oldest = in.DeliveredAt
		}
		if in.DeliveredAt.After(newest) {
			newest = in.DeliveredAt
		}
	}
	if oldest.IsZero() {
		return time.Time{}
	}
	at := newest.Add(cs.DebounceQuiet)
	if m := oldest.Add(cs.DebounceMax); m.Before(at) {
		at = m
	}
	return at
}

// merge places firings among pending inputs by time (C6): a firing comes
// before the first input whose event committed after its scheduled time.
// Inputs keep their delivery order among themselves.
func merge(pending []session.Input, firings []session.Firing, events map[uuid.UUID]ledger.Event) []item {
	out := make([]item, 0, len(pending)+len(firings))
	next := 0
	for i := range pending {
		in := &pending[i]
		at := in.DeliveredAt
		if in.EventID != nil {
			if ev, ok := events[*in.EventID]; ok {
				at = ev.CommitTime
			}
		}
		for ; next < len(firings) && firings[next].At.Before(at); next++ {
			out = append(out, firingItem(firings[next]))
		}
		out = append(out, item{row: in, at: at})
	}
	for ; next < len(firings); next++ {
		out = append(out, firingItem(firings[next]))
	}
	return out
}

func firingItem(f session.Firing) item {
	ev := f.Event()
	ev.ID = ledger.NewID()
	return item{firing: &f, event: ev, at: f.At}
}

// orderKey is the listing key of an input with delivery sequence seq (see
// session_inputs.order_key).
func orderKey(seq int64) string { return fmt.Sprintf("%020d", seq) }
