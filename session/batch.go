package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/expr"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// MaxIDLen is the longest session id, in bytes.
const MaxIDLen = 512

// batch is one dispatch transaction's work.
type batch struct {
	d *Dispatcher
	// index is the trigger index the batch matches against: the
	// dispatcher's, or a backfill's (its version alone).
	index *triggerIndex
	// backfill is the backfill the batch works, nil for live dispatch: its
	// cursor moves instead of the dispatch cursor.
	backfill *action.Backfill
	// join, with backfill, is the dispatch cursor the backfilled version
	// joins live dispatch at, once the batch commits; nil: not yet.
	join *int64
	// dry, for a dry run, counts per trigger and leaves every cursor and
	// execution queue alone (DryRun).
	dry *DryRunStats
	tx  pgx.Tx
	// commit: flush ends the transaction, sending COMMIT with its last
	// writes; when it returns nil, the batch is committed (DispatchOnce).
	commit bool
	now    time.Time
	diags  map[diagKey]*diagEntry
	notify bool
	// timers: a session timer was set; the timer loop may sleep past it.
	timers bool
	// changed are the sessions the batch created or delivered to (issue 12).
	changed Notice
	// notice is what the batch announces once committed, in the
	// transaction xid (flush).
	notice Notice
	xid    string
	// Deliveries and intake records wait for the batch's end (flush), where
	// each kind is written by one set-based statement: the sessions they
	// reach stay unlocked while the batch's events are matched (issue 14).
	deliveries []delivery
	intakes    []intakeRow
	// events counts the events the batch read.
	events int
	// cand numbers the (event, action version) pairs in dispatch order, so
	// intake records written at the end keep the order they were made in.
	cand int
	// matches are the executions of actions without a session block to
	// queue at the batch's end, in dispatch order (issue 15).
	matches []Match
}

// delivery is an event bound for a session as an EVENT input (deliver).
type delivery struct {
	a      scope
	tg     *target
	ev     ledger.Event
	cand   int
	starts bool
}

// intakeRow is an intake record to write (S5), in dispatch order.
type intakeRow struct {
	cand      int
	actionID  string
	version   int
	eventID   string
	trigger   string
	sessionID *string
	reason    string
	message   string
}

type diagKey struct {
	action  string
	version int
	trigger string
}

type diagEntry struct {
	count int64
	event ledger.Event
	msg   string
}

// scope is an action version an event is matched against, and whether the
// version covers the event (A2). A covering version's start triggers create
// sessions and its triggers leave intake records (S5); a version that does
// not cover the event is matched only for the open sessions pinned to it
// (a session keeps the version it started with) and records nothing, so an
// update never doubles an intake record. Either way a version's triggers
// deliver only to sessions of that version.
type scope struct {
	*action.Compiled
	covers bool
}

// target is a session an event is about to be delivered to (S6: once per
// session, whatever number of triggers matched).
type target struct {
	id       string
	triggers []string
	// unchecked are resume triggers that named the session without looking
	// it up; if it turns out missing or closed, each leaves an intake record.
	unchecked []*action.CompiledTrigger
}

func (b *batch) event(ctx context.Context, ev ledger.Event) error {
	b.events++
	// A session clock's firing is an input of its own session alone (C3);
	// a schedule trigger's goes to that trigger alone (A4): candidates.
	cands := b.index.candidates(ev)
	if len(cands) == 0 {
		return nil
	}
	data, err := ev.Data.Decode()
	if err != nil {
		return fmt.Errorf("decode event data: %w", err)
	}
	evVars := &expr.Event{ID: ev.ID.String(), Type: ev.Type, Data: data, CommitTime: ev.CommitTime, Position: ev.Position}
	for _, ar := range cands {
		b.cand++
		if ar.action.Session == nil {
			b.sessionless(ctx, ev, evVars, ar)
			continue
		}
		if err := b.action(ctx, ev, evVars, ar); err != nil {
			return err
		}
	}
	return nil
}

func (b *batch) action(ctx context.Context, ev ledger.Event, evVars *expr.Event, ar actionRefs) error {
	a := scope{ar.action, ar.covers}
	var targets []*target
	byID := map[string]*target{}
	add := func(id string, t *action.CompiledTrigger, checked bool) {
		tg := byID[id]
		if tg == nil {
			tg = &target{id: id}
			byID[id] = tg
			targets = append(targets, tg)
		}
		tg.triggers = append(tg.triggers, t.Name)
		if !checked {
			tg.unchecked = append(tg.unchecked, t)
		}
	}
	evOnly := expr.Vars{Event: evVars}
	created := map[string]bool{} // sessions this event created: it is their origin, not an input (S2, S6)
	for _, t := range startsFirst(ar.triggers) {
		if t.Start != nil {
			if !b.predicate(ctx, a, t, t.Predicate, ev, evOnly) {
				continue
			}
			id, isNew, ok, err := b.start(ctx, a, t, ev, evOnly)
			if err != nil {
				return err
			}
			if isNew {
				created[id] = true
				b.dry.count(t.Name, func(c *DryRunTrigger) { c.Started++ })
			} else if ok && !created[id] {
				add(id, t, true)
			}
			continue
		}
		// Event terms decide before the session is looked up: an event they
		// reject is no business of any session (and no intake record).
		readsSession := t.Predicate.ReadsSession()
		if !readsSession && !b.predicate(ctx, a, t, t.Predicate, ev, evOnly) {
			continue
		}
		if t.Guard != nil && !b.predicate(ctx, a, t, t.Guard, ev, evOnly) {
			continue
		}
		id, err := evalID(ctx, t.ResumeID, evOnly)
		if err != nil {
			if err := b.intake(ctx, a, t, ev, nil, ReasonIDFailed, err.Error()); err != nil {
				return err
			}
			continue
		}
		if created[id] {
			continue // S6: the event already reached the session as its origin
		}
		if !readsSession {
			add(id, t, false) // looked up when delivered, in the same statement
			continue
		}
		s, err := b.lock(ctx, a, id)
		if err != nil {
			return err
		}
		if s == nil || s.Status.Final() {
			if err := b.missed(ctx, a, t, ev, id, s); err != nil {
				return err
			}
			continue
		}
		if s.Version != a.Version {
			continue // A2: an open session is resumed by its own version's triggers alone
		}
		input, err := s.Input.Decode()
		if err != nil {
			return err
		}
		vars := expr.Vars{Event: evVars, Session: &expr.Session{ID: s.ID, Input: input, StartedAt: s.StartedAt}}
		if b.predicate(ctx, a, t, t.Predicate, ev, vars) {
			add(s.ID, t, true)
		}
	}
	for _, tg := range targets {
		if err := b.deliver(ctx, a, tg, ev); err != nil {
			return err
		}
	}
	return nil
}

// startsFirst orders an action's matching triggers start triggers first
// (each group keeps definition order), so a session an event creates is
// known before any resume trigger names it, whatever order the triggers
// were defined in.
func startsFirst(ts []*action.CompiledTrigger) []*action.CompiledTrigger {
	out := make([]*action.CompiledTrigger, 0, len(ts))
	for _, t := range ts {
		if t.Start != nil {
			out = append(out, t)
		}
	}
	for _, t := range ts {
		if t.Start == nil {
			out = append(out, t)
		}
	}
	return out
}

// missed records the intake record of a resume that named a session that
// is missing (s nil) or closed.
func (b *batch) missed(ctx context.Context, a scope, t *action.CompiledTrigger, ev ledger.Event, id string, s *Session) error {
	if s == nil {
		return b.intake(ctx, a, t, ev, &id, ReasonSessionNotFound, "no session with this id")
	}
	return b.intake(ctx, a, t, ev, &id, ReasonSessionClosed, "the session is "+string(s.Status))
}

// predicate evaluates a trigger's predicate; an evaluation error is a
// non-match recorded as a diagnostic.
func (b *batch) predicate(ctx context.Context, a scope, t *action.CompiledTrigger, p *expr.Program, ev ledger.Event, vars expr.Vars) bool {
	v, err := p.Eval(ctx, vars)
	if err == nil {
		if ok, isBool := v.(bool); isBool {
			if ok && p == t.Predicate {
				b.dry.count(t.Name, func(c *DryRunTrigger) { c.Matched++ })
			}
			return ok
		}
		err = fmt.Errorf("predicate gave %T, not bool", v)
	}
	k := diagKey{a.ActionID.String(), a.Version, t.Name}
	e := b.diags[k]
	if e == nil {
		e = &diagEntry{}
		b.diags[k] = e
	}
	e.count++
	e.event, e.msg = ev, text.Store(err.Error(), 1000)
	return false
}

// start maps the event to a session input and finds or creates the session
// (S2, S3), leaving it locked. It returns the session id and whether this
// event created the session, or ok false when the event became an intake
// record instead (S5).
//
// S2 reads "a start event creates the session, or is delivered to it when
// it is open with the same input": the event that creates a session is its
// origin, from which its input comes, and is not also one of its inputs; a
// later start event for the open session with the same input is delivered.
//
// A2: only a version that covers the event creates sessions. The start
// triggers of an older version still deliver to the open sessions pinned to
// it, and a start naming an open session of another version is left to that
// session's own triggers: it neither delivers nor records anything.
func (b *batch) start(ctx context.Context, a scope, t *action.CompiledTrigger, ev ledger.Event, vars expr.Vars) (id string, created, ok bool, err error) {
	mapped, err := t.Start.Eval(ctx, vars)
	if err != nil {
		return "", false, false, b.intake(ctx, a, t, ev, nil, ReasonMappingFailed, err.Error())
	}
	raw, err := jsonvalue.Encode(mapped)
	if err != nil {
		return "", false, false, b.intake(ctx, a, t, ev, nil, ReasonMappingFailed, "the mapped input is not JSON: "+err.Error())
	}
	if err := jsonvalue.Check(raw, ""); err != nil {
		return "", false, false, b.intake(ctx, a, t, ev, nil, ReasonInputInvalid, err.Error())
	}
	input, err := raw.Decode() // numbers as json.Number, as every reader sees them
	if err != nil {
		return "", false, false, err
	}
	if a.Session.Schema != nil {
		if err := a.Session.Schema.Validate(input); err != nil {
			return "", false, false, b.intake(ctx, a, t, ev, nil, ReasonInputInvalid, err.Error())
		}
	}
	id, err = evalID(ctx, a.Session.ID, expr.Vars{Session: &expr.Session{Input: input}})
	if err != nil {
		return "", false, false, b.intake(ctx, a, t, ev, nil, ReasonIDFailed, err.Error())
	}
	if !a.covers {
		return b.startPinned(ctx, a, t, id, raw, input, ev)
	}
	// E1: the end is computed when the session starts; an end that cannot
	// be computed fails the start.
	endsAt, err := evalEnd(ctx, a.Session, input, ev.CommitTime)
	if err != nil {
		return "", false, false, b.intake(ctx, a, t, ev, &id, ReasonEndsFailed, "session.ends: "+err.Error())
	}
	slot, err := slotOf(ctx, a.Session, input)
	if err != nil {
		return "", false, false, b.intake(ctx, a, t, ev, &id, ReasonSlotKeyFailed, "session.concurrencyKey: "+err.Error())
	}
	if slot != nil {
		// G7: a new session of a singleton needs its slot free; a start for
		// a session that exists goes on as below.
		holder, err := slotHolder(ctx, b.tx, a.ActionID, id, *slot)
		if err != nil {
			return "", false, false, err
		}
		if holder != "" {
			return "", false, false, b.intake(ctx, a, t, ev, &id, ReasonSlotTaken, SlotTakenMessage(holder))
		}
	}
	var sid int64
	err = b.tx.QueryRow(ctx, `INSERT INTO sessions (action_id, id, version, input, status, origin_event_id, started_at, ends_at, created_at, updated_at,
			slot, display_title, max_usd)
		VALUES ($1, $2, $3, $4, 'OPEN', $5, $6, $7, $8, $8, $9, $10, $11) ON CONFLICT (action_id, id) DO NOTHING RETURNING sid`,
		a.ActionID, id, a.Version, []byte(raw), ev.ID, ev.CommitTime, endsAt, b.now, slot, titleOf(ctx, a.Session, input),
		capOf(a.Session)).Scan(&sid)
	if err == nil {
		b.changed.Session(sid)
		return id, true, true, b.startTimer(ctx, a.Session, sid, Clock{StartedAt: ev.CommitTime, EndsAt: endsAt})
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", false, false, fmt.Errorf("create session: %w", err)
	}
	s, err := b.lock(ctx, a, id)
	if err != nil {
		return "", false, false, err
	}
	switch {
	case s == nil:
		return "", false, false, fmt.Errorf("create session %q: conflict with no row", id)
	case s.Status.Final():
		return "", false, false, b.intake(ctx, a, t, ev, &id, ReasonSessionClosed, "a closed session never starts again; it is "+string(s.Status))
	case s.Version != a.Version:
		return "", false, false, nil // A2: open at another version, whose triggers decide
	case !jsonvalue.Equal(s.Input, raw):
		return "", false, false, b.intake(ctx, a, t, ev, &id, ReasonInputConflict, "the open session has a different input")
	}
	return b.startExisting(ctx, a, t, s, input, ev)
}

// startPinned delivers a start event matched by a version that does not
// cover it to the open session of that version it names, when its input is
// the same (S2, A2); anything else is no business of this version.
func (b *batch) startPinned(ctx context.Context, a scope, t *action.CompiledTrigger, id string, raw jsonvalue.Value, input any, ev ledger.Event) (string, bool, bool, error) {
	s, err := b.lock(ctx, a, id)
	if err != nil || s == nil || s.Status.Final() || s.Version != a.Version || !jsonvalue.Equal(s.Input, raw) {
		return "", false, false, err
	}
	return b.startExisting(ctx, a, t, s, input, ev)
}

// startExisting handles a start event for the open session s with the same
// input, which it will be delivered to: an earlier commit time moves the
// session's start (S3), and a session with no origin takes this one.
func (b *batch) startExisting(ctx context.Context, a scope, t *action.CompiledTrigger, s *Session, input any, ev ledger.Event) (string, bool, bool, error) {
	id := s.ID
	if ev.CommitTime.Before(s.StartedAt) {
		// S3: the session's origin is its earliest-committed start event
		// delivered, and startedAt its commit time (never moved later); the
		// end is computed again from it (E1) and the clock moves with it.
		ends, err := evalEnd(ctx, a.Session, input, ev.CommitTime)
		if err != nil {
			return "", false, false, b.intake(ctx, a, t, ev, &id, ReasonEndsFailed, "session.ends: "+err.Error())
		}
		if ends == nil {
			ends = s.EndsAt
		}
		if _, err := b.tx.Exec(ctx, `UPDATE sessions SET started_at = $2, origin_event_id = $3, ends_at = $4, updated_at = $5 WHERE sid = $1`,
			s.SID, ev.CommitTime, ev.ID, ends, b.now); err != nil {
			return "", false, false, fmt.Errorf("move session start: %w", err)
		}
		b.changed.Session(s.SID)
		if a.Session.Timed() {
			// Firings between the new and the old start may be due: let the
			// timer loop look at the session now.
			b.timers = true
			return id, false, true, setTimer(ctx, b.tx, s.SID, b.now)
		}
	} else if s.OriginEventID == nil {
		if _, err := b.tx.Exec(ctx, `UPDATE sessions SET origin_event_id = $2, updated_at = $3 WHERE sid = $1`, s.SID, ev.ID, b.now); err != nil {
			return "", false, false, fmt.Errorf("set session origin: %w", err)
		}
	}
	return id, false, true, nil
}

// startTimer gives a new session of a timed version its timer, due at its
// first firing that starts a turn or its end, whichever comes first.
func (b *batch) startTimer(ctx context.Context, cs *action.CompiledSession, sid int64, c Clock) error {
	if !cs.Timed() {
		return nil
	}
	due := c.WakeAfter(cs, c.StartedAt, true)
	if due.IsZero() {
		return nil
	}
	b.timers = true
	return setTimer(ctx, b.tx, sid, due)
}

// lock reads and row-locks the session addressed by a and id, whatever its
// version, or returns nil. Callers compare Session.Version with a's (A2): a
// closed session of any version still makes a covering version's intake
// record (S5), an open one of another version is left to its own triggers.
func (b *batch) lock(ctx context.Context, a scope, id string) (*Session, error) {
	s, err := scanSession(b.tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE sid = (`+routeSQL+`) FOR UPDATE`, a.ActionID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock session: %w", err)
	}
	return s, nil
}

// deliver queues the event as an EVENT input of the session, once (S6);
// flushDeliveries writes it at the batch's end.
func (b *batch) deliver(_ context.Context, a scope, tg *target, ev ledger.Event) error {
	b.deliveries = append(b.deliveries, delivery{a: a, tg: tg, ev: ev, cand: b.cand, starts: a.Session.StartsTurn(tg.triggers)})
	return nil
}

// deliverSQL appends each delivery as an EVENT input of its session in one
// statement whatever their number: it finds each session by action and
// id, checks it is pinned to the delivering version (A2) and open, skips
// an input it already has (S6), takes the next places in its delivery
// order (consecutive, in the deliveries' order) and makes it runnable when
// an input starts a turn (T3), after the window (T4) unless its end has
// come (E3). The sessions' rows are locked by the UPDATE, only now, at the
// end of the batch. It returns each session that took deliveries, with
// its next turn time and the ordinals of the deliveries it took.
const deliverSQL = `
WITH d AS (
	SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::boolean[], $5::text[], $6::uuid[], $7::text[], $8::int[], $9::timestamptz[],
	                     $11::timestamptz[], $12::bigint[])
	       WITH ORDINALITY AS d (action_id, id, version, starts, identity, event_id, triggers, size, window_end, quiet_end, max_us, ord)),
x AS (
	SELECT d.*, s.sid, row_number() OVER w AS rn, count(*) OVER w AS n,
	       min(d.window_end) OVER w AS window_first, max(d.quiet_end) OVER w AS quiet_last, max(d.max_us) OVER w AS max_wait
	  FROM d
	  -- G5: an id whose session has a successor routes to the newest. The
	  -- route and the session are two lateral probes, so that the session
	  -- is found by its key: written as s.sid = (subquery), the subquery
	  -- was no index condition, and a generic plan read every open session
	  -- of the action's version, running the subquery for each (issue 14:
	  -- 3 ms a delivery with 100 sessions).
	  JOIN LATERAL (SELECT coalesce(r.route_sid, r.sid) AS sid FROM sessions r WHERE r.action_id = d.action_id AND r.id = d.id LIMIT 1) rt ON true
	  JOIN LATERAL (SELECT sid, version, status FROM sessions s WHERE s.sid = rt.sid LIMIT 1) s
	       ON s.version = d.version AND s.status IN ('OPEN', 'WAITING')
	  LEFT JOIN LATERAL (SELECT true AS had FROM session_inputs i WHERE i.sid = s.sid AND i.identity = d.identity LIMIT 1) h ON true
	 WHERE h.had IS NULL
	WINDOW w AS (PARTITION BY s.sid ORDER BY d.ord ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)),
-- The sessions' rows, locked in sid order and read as they are now (a
-- turn may have settled since the statement's snapshot): what wakes a
-- session is decided on them.
lk AS (
	SELECT s.sid, s.status, s.wait, s.wake_on, s.input_count FROM sessions s WHERE s.sid IN (SELECT sid FROM x) ORDER BY s.sid FOR NO KEY UPDATE),
-- G10, G4: a delivery wakes a session that is OPEN (one that starts a turn),
-- WAITING after a failed turn (any that starts a turn), or parked (one of
-- its resumeOn triggers, whether or not it starts a turn). base is the
-- session's delivery sequence before the batch: the row is locked, so u
-- finds the same. k carries every column the statements after it need,
-- so that none joins two of these lists again (with nested loops, each
-- such join of a 500-delivery batch was 250,000 comparisons; issue 14).
k AS (
	SELECT x.*, lk.input_count AS base,
	       coalesce((x.starts AND (lk.status = 'OPEN' OR lk.wait = 'INPUT'))
	                OR (lk.wait = 'PARK' AND x.triggers::jsonb ?| lk.wake_on), false) AS wakes,
	       coalesce(lk.wait = 'PARK' AND x.triggers::jsonb ?| lk.wake_on, false) AS resumes
	  FROM x JOIN lk ON lk.sid = x.sid
	 -- Closed since the statement's snapshot: nothing is delivered (u
	 -- updates only what k keeps, by key).
	 WHERE lk.status IN ('OPEN', 'WAITING')),
g AS (
	SELECT k.sid, k.n, k.window_first, k.quiet_last, k.max_wait, bool_or(k.wakes) AS wakes, array_agg(k.ord) AS ords
	  FROM k
	 GROUP BY k.sid, k.n, k.window_first, k.quiet_last, k.max_wait),
u AS (
	UPDATE sessions s SET input_count = s.input_count + g.n, updated_at = $10, archived_at = NULL,
	       next_turn_at = CASE WHEN NOT g.wakes THEN s.next_turn_at
	           -- G3: held deliveries become eligible once quiet has passed since the newest or max since the oldest;
	           -- a session already due (a message waits, or the time came) stays due.
	           WHEN g.quiet_last IS NOT NULL AND (s.ends_at IS NULL OR s.ends_at > $10) THEN
	               CASE WHEN s.next_turn_at <= $10 THEN s.next_turn_at
	                    ELSE least(g.quiet_last, coalesce((SELECT min(o.delivered_at) FROM session_inputs o
	                        WHERE o.sid = s.sid AND o.status = 'PENDING' AND o.kind = 'EVENT'), $10) + g.max_wait * interval '1 microsecond') END
	           ELSE coalesce(s.next_turn_at, CASE WHEN s.ends_at <= $10 THEN $10 ELSE g.window_first END) END,
	       status = CASE WHEN g.wakes THEN 'OPEN' ELSE s.status END,
	       reason = CASE WHEN g.wakes AND s.wait IS NOT NULL THEN NULL ELSE s.reason END,
	       wait = CASE WHEN g.wakes THEN NULL ELSE s.wait END,
	       wake_on = CASE WHEN g.wakes THEN NULL ELSE s.wake_on END
	  FROM g
	 WHERE s.sid = g.sid
	RETURNING s.sid, s.next_turn_at, g.ords,
	          -- As the claim's WHERE: a claim would take the session now.
	          s.status = 'OPEN' AND s.next_turn_at <= $10 AND (s.lease_expires_at IS NULL OR s.lease_expires_at <= $10) AS claimable),
-- G4: a delivery by a trigger the park names resumes it.
p AS (
	UPDATE session_parks p SET status = 'RESUMED', resolution = 'event', resolved_by = e.event_id::text, resolved_at = $10
	  FROM (SELECT DISTINCT ON (sid) sid, event_id FROM k WHERE k.resumes ORDER BY sid, ord) e
	 WHERE p.sid = e.sid AND p.status = 'PARKED'
	RETURNING p.sid),
i AS (
	INSERT INTO session_inputs (sid, seq, identity, kind, event_id, triggers, starts_turn, status, byte_size, delivered_at, order_key)
	SELECT k.sid, k.base + k.rn, k.identity, 'EVENT', k.event_id, ARRAY(SELECT jsonb_array_elements_text(k.triggers::jsonb)),
	       k.starts, 'PENDING', k.size, $10, lpad((k.base + k.rn)::text, 20, '0')
	  FROM k
	RETURNING sid)
SELECT u.sid, u.next_turn_at, u.ords, coalesce(u.claimable, false) FROM u WHERE (SELECT count(*) FROM i) >= 0 AND (SELECT count(*) FROM p) >= 0`

// flushDeliveries writes the batch's deliveries (deliverSQL). A session
// that gets nothing (missing, closed, or open at another version) leaves,
// for each resume trigger that named it without looking it up, an intake
// record when the delivering version covers the event (S5).
func (b *batch) flushDeliveries(ctx context.Context) error {
	if len(b.deliveries) == 0 {
		return nil
	}
	n := len(b.deliveries)
	actionIDs, ids, identities, triggers := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, sizes := make([]int32, n), make([]int32, n)
	starts := make([]bool, n)
	eventIDs := make([]string, n)
	windows := make([]time.Time, n)
	quietEnds, maxUs := make([]*time.Time, n), make([]*int64, n)
	for i, dl := range b.deliveries {
		tj, err := json.Marshal(dl.tg.triggers)
		if err != nil {
			return fmt.Errorf("deliver: %w", err)
		}
		actionIDs[i], ids[i], versions[i], starts[i] = dl.a.ActionID.String(), dl.tg.id, int32(dl.a.Version), dl.starts
		identities[i], eventIDs[i], triggers[i], sizes[i] = "event/"+dl.ev.ID.String(), dl.ev.ID.String(), string(tj), int32(len(dl.ev.Data))
		// T4: an input that finds the session idle starts its turn after
		// the window; after the session's end nothing waits (E3).
		windows[i] = b.now.Add(dl.a.Session.Window)
		if cs := dl.a.Session; cs.DebounceQuiet > 0 && dl.starts {
			// G3: a delivery that would start a turn is held.
			q, m := b.now.Add(cs.DebounceQuiet), cs.DebounceMax.Microseconds()
			quietEnds[i], maxUs[i] = &q, &m
		}
	}
	rows, err := b.tx.Query(ctx, deliverSQL, actionIDs, ids, versions, starts, identities, eventIDs, triggers, sizes, windows, b.now,
		quietEnds, maxUs)
	if err != nil {
		return fmt.Errorf("deliver: %w", err)
	}
	delivered := make([]bool, n)
	var timerSIDs []int64
	var timerDue []time.Time
	var sid int64
	var next *time.Time
	var ords []int64
	var claimable bool
	_, err = pgx.ForEachRow(rows, []any{&sid, &next, &ords, &claimable}, func() error {
		b.changed.Session(sid)
		for _, ord := range ords {
			i := int(ord - 1)
			delivered[i] = true
			dl := b.deliveries[i]
			// The executors are woken for a session a claim would take
			// now, whatever woke it (an input that starts a turn, or one
			// that resumes a park). One whose turn is running (leased) is
			// left to that turn's settle, which finds the input pending and
			// wakes them (issue 14: a wake for a leased session was a claim
			// that found nothing); a window's end wakes them through the
			// timer.
			b.notify = b.notify || claimable
			if dl.starts && next != nil && next.After(b.now) && !slices.Contains(timerSIDs, sid) {
				// The window's end wakes the executor through the timer.
				timerSIDs, timerDue = append(timerSIDs, sid), append(timerDue, *next)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deliver: %w", err)
	}
	if len(timerSIDs) > 0 {
		b.timers = true
		if _, err := b.tx.Exec(ctx, `INSERT INTO session_timers (sid, due_at) SELECT * FROM unnest($1::bigint[], $2::timestamptz[])
			ON CONFLICT (sid) DO UPDATE SET due_at = least(session_timers.due_at, EXCLUDED.due_at)`, timerSIDs, timerDue); err != nil {
			return fmt.Errorf("session: set timers: %w", err)
		}
	}
	return b.missedDeliveries(ctx, delivered)
}

// missedDeliveries records the intake records of the deliveries that
// reached no session, where a resume trigger named the session without
// looking it up and the version covers the event (S5): one read for all
// of them. A session open at another version is left to its own triggers
// (A2). Final statuses never change, so the read needs no lock.
func (b *batch) missedDeliveries(ctx context.Context, delivered []bool) error {
	var idx []int
	var actionIDs, ids []string
	for i, dl := range b.deliveries {
		if delivered[i] || len(dl.tg.unchecked) == 0 || !dl.a.covers {
			continue
		}
		idx = append(idx, i)
		actionIDs, ids = append(actionIDs, dl.a.ActionID.String()), append(ids, dl.tg.id)
	}
	if len(idx) == 0 {
		return nil
	}
	rows, err := b.tx.Query(ctx, `SELECT s.status FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS k (action_id, id, ord)
		  LEFT JOIN sessions s ON s.action_id = k.action_id AND s.id = k.id ORDER BY k.ord`, actionIDs, ids)
	if err != nil {
		return fmt.Errorf("deliver: look up sessions: %w", err)
	}
	statuses, err := pgx.CollectRows(rows, pgx.RowTo[*Status])
	if err != nil {
		return fmt.Errorf("deliver: look up sessions: %w", err)
	}
	for j, i := range idx {
		dl, st := b.deliveries[i], statuses[j]
		var s *Session
		switch {
		case st != nil && !st.Final():
			continue // open at another version, whose triggers decide (A2)
		case st != nil:
			s = &Session{Status: *st}
		}
		for _, t := range dl.tg.unchecked {
			b.cand = dl.cand
			if err := b.missed(ctx, dl.a, t, dl.ev, dl.tg.id, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// intake records an event that failed to start or resume (S5). Only the
// version that covers the event records (A2): the triggers of an older
// version, matched for its pinned sessions alone, record nothing.
func (b *batch) intake(_ context.Context, a scope, t *action.CompiledTrigger, ev ledger.Event, id *string, reason, msg string) error {
	if !a.covers {
		return nil
	}
	var sid *string
	if id != nil {
		v := *id // the caller's variable may change before the flush
		sid = &v
	}
	b.dry.count(t.Name, func(c *DryRunTrigger) { c.IntakeRecords++ })
	b.intakes = append(b.intakes, intakeRow{cand: b.cand, actionID: a.ActionID.String(), version: a.Version, eventID: ev.ID.String(),
		trigger: t.Name, sessionID: sid, reason: reason, message: text.Store(msg, 2000)})
	return nil
}

// flush writes what the batch kept for its end, in one round trip after
// the deliveries: intake records in the order they were made,
// diagnostics and the cursor at position; it leaves the notifications in
// b.notice and b.xid, posted once the batch commits.
func (b *batch) flush(ctx context.Context, position int64) error {
	if err := b.flushDeliveries(ctx); err != nil {
		return err
	}
	q := &pgx.Batch{}
	if len(b.intakes) > 0 {
		slices.SortStableFunc(b.intakes, func(x, y intakeRow) int { return x.cand - y.cand })
		n := len(b.intakes)
		actionIDs, eventIDs, triggers, reasons, msgs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		versions := make([]int32, n)
		ids := make([]*string, n)
		for i, r := range b.intakes {
			actionIDs[i], versions[i], eventIDs[i], triggers[i], ids[i], reasons[i], msgs[i] = r.actionID, int32(r.version), r.eventID, r.trigger, r.sessionID, r.reason, r.message
		}
		q.Queue(`INSERT INTO intake_records (action_id, version, event_id, trigger, session_id, reason, message, created_at)
			SELECT u.action_id, u.version, u.event_id, u.trigger, u.session_id, u.reason, u.message, $8
			  FROM unnest($1::uuid[], $2::int[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[])
			       WITH ORDINALITY AS u (action_id, version, event_id, trigger, session_id, reason, message, ord)
			 ORDER BY u.ord`, actionIDs, versions, eventIDs, triggers, ids, reasons, msgs, b.now)
	}
	for k, e := range b.diags {
		q.Queue(`INSERT INTO trigger_diagnostics (action_id, version, trigger, count, last_event_id, last_message, last_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (action_id, version, trigger) DO UPDATE SET count = trigger_diagnostics.count + EXCLUDED.count,
				last_event_id = EXCLUDED.last_event_id, last_message = EXCLUDED.last_message, last_at = EXCLUDED.last_at`,
			k.action, k.version, k.trigger, e.count, e.event.ID, e.msg, b.now)
	}
	if b.dry != nil {
		for _, m := range b.matches {
			b.dry.Executions++
			for _, n := range m.Triggers {
				b.dry.count(n, func(c *DryRunTrigger) { c.Executions++ })
			}
		}
		b.matches = nil
	}
	if len(b.matches) > 0 {
		if b.d.Executions == nil {
			return fmt.Errorf("dispatch: %d events matched actions without a session block, and this dispatcher cannot queue executions", len(b.matches))
		}
		b.d.Executions(q, b.now, b.matches)
	}
	scanXID := func(r pgx.Row) error { return r.Scan(&b.xid) }
	if b.dry != nil {
		q.Queue(`SELECT 1`) // no cursor moves in a dry run
	} else if b.backfill != nil {
		action.QueueBackfillProgress(q, b.backfill, position, int64(b.events), b.join, b.now, XIDColumn, scanXID)
	} else {
		q.Queue(`UPDATE dispatch_state SET position = $1, updated_at = $2 RETURNING `+XIDColumn, position, b.now).QueryRow(scanXID)
	}
	b.notice = b.changed
	b.notice.Turns, b.notice.Timers, b.notice.Executions = b.notify, b.timers, len(b.matches) > 0
	if b.commit {
		// The sessions the deliveries locked are held until the commit:
		// sending it with the last writes frees them a round trip sooner
		// for the turn commits and claims that wait on or skip them
		// (issue 14).
		q.Queue("COMMIT")
	}
	if err := b.tx.SendBatch(ctx, q).Close(); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if b.commit {
		if st := b.tx.Conn().PgConn().TxStatus(); st != 'I' {
			return fmt.Errorf("dispatch: batch not committed (transaction status %c)", st)
		}
	}
	return nil
}

// evalID evaluates a session id expression and checks the id is storable.
func evalID(ctx context.Context, p *expr.Program, vars expr.Vars) (string, error) {
	v, err := p.Eval(ctx, vars)
	if err != nil {
		return "", err
	}
	id, ok := v.(string)
	switch {
	case !ok:
		return "", fmt.Errorf("session id is %T, not a string", v)
	case id == "":
		return "", errors.New("session id is empty")
	case len(id) > MaxIDLen:
		return "", fmt.Errorf("session id is longer than %d bytes", MaxIDLen)
	case !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0:
		return "", errors.New("session id is not valid text")
	}
	return id, nil
}
