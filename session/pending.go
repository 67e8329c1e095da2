package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/ledger"
)

// MaxMessagesPerTurn is the most messages one turn takes (G3).
const MaxMessagesPerTurn = 32

// PendingRead asks QueuePending about one claimed session's pending inputs.
type PendingRead struct {
	SID int64
	// Limit: the first Limit+1 pending inputs are read (one more than a
	// turn may take tells whether anything is left over, E4).
	Limit int
	// Ended: the session's end has come. The read then reaches at least to
	// the last pending COMMAND (answers are never cut off from the final
	// turn, E6), and commands are not read apart.
	Ended bool
}

// Pending is what QueuePending read of a session's pending inputs.
type Pending struct {
	// Starts: an input that starts a turn is pending (T3).
	Starts bool
	// Commands are the pending answers (COMMAND inputs, P5, H3), in
	// delivery order; read before the end only.
	Commands []Input
	// Messages are the pending messages and handoff notes (G1, G3, G5),
	// in delivery order; read before the end only.
	Messages []Input
	// Inputs are the first pending inputs in delivery order (see PendingRead).
	Inputs []Input
}

// InputEventColumns lists the columns ScanInputEvent reads: an input (of
// table alias i) and its event (alias e, left-joined).
var InputEventColumns = prefixed("i", InputColumns) + `, e.type, e.data, e.commit_time, e.position`

// ScanInputEvent scans a row of InputEventColumns; the event is nil for
// an input without one.
func ScanInputEvent(row pgx.Row) (Input, *ledger.Event, error) {
	var in Input
	var typ *string
	var ev ledger.Event
	var pos *int64
	var at *time.Time
	err := row.Scan(append(in.dests(), &typ, &ev.Data, &at, &pos)...)
	in.utc()
	if err != nil || typ == nil || in.EventID == nil {
		return in, nil, err
	}
	ev.ID, ev.Type, ev.Position, ev.CommitTime = *in.EventID, *typ, *pos, at.UTC()
	return in, &ev, nil
}

// QueuePending queues the reads a claim plans new turns from (T2, T3, P3,
// E3, E6): for each session whether an input that starts a turn is
// pending, its pending answers, and its first pending inputs, each with
// its event, which go to events. out gets an entry per session read.
//
// Sent in the claiming transaction, the reads see every input delivered
// before the claim: a delivery locks the session row first.
func QueuePending(b *pgx.Batch, reads []PendingRead, out map[int64]*Pending, events map[uuid.UUID]ledger.Event) {
	n := len(reads)
	sids, limits, ended := make([]int64, n), make([]int32, n), make([]bool, n)
	for i, r := range reads {
		sids[i], limits[i], ended[i] = r.SID, int32(r.Limit), r.Ended
		out[r.SID] = &Pending{}
	}
	queuePending(b, `unnest($1::bigint[], $2::int[], $3::boolean[]) AS u (sid, lim, ended)`,
		[]any{sids, limits, ended}, out, events)
}

// VersionReads says, for action versions a claim may meet, how its
// sessions' pending inputs are read (QueueClaimedPending): the Limit of
// PendingRead, and whether the version keeps a clock (its sessions' taken
// firings are read too). The slices are parallel.
type VersionReads struct {
	ActionIDs []uuid.UUID
	Versions  []int32
	Limits    []int32
	Clocked   []bool
}

// Add appends one version's reads.
func (v *VersionReads) Add(actionID uuid.UUID, version, limit int, clocked bool) {
	v.ActionIDs = append(v.ActionIDs, actionID)
	v.Versions = append(v.Versions, int32(version))
	v.Limits = append(v.Limits, int32(limit))
	v.Clocked = append(v.Clocked, clocked)
}

// QueueClaimedPending queues, behind QueueClaim in the same batch, the
// reads of QueuePending and QueueTakenFirings for the sessions the claim
// locks (ClaimedSIDs) whose action version is in known; a session's end
// has come when its ends_at is at or before now (Clock.Ended). out gets an
// entry for each session read, so a claimed session without one (its
// version was not in known) is read afterwards with QueuePending. taken
// gets the firings of the clocked versions' sessions.
//
// The reads run while the claim's locks are held, as QueuePending's do,
// but in the claim's own round trip (issue 14).
func QueueClaimedPending(b *pgx.Batch, now time.Time, known VersionReads, out map[int64]*Pending, taken map[int64]map[string]time.Time, events map[uuid.UUID]ledger.Event) {
	// Each claimed session is found by its key (LATERAL ... LIMIT 1): a
	// generic plan made while sessions was small could otherwise read the
	// versions' sessions through (action_id, sid) and filter them.
	rel := `(SELECT s.sid, k.lim, coalesce(s.ends_at <= $1, false) AS ended, k.clocked
		   FROM unnest(` + ClaimedSIDs + `) AS c (sid)
		   JOIN LATERAL (SELECT s.sid, s.action_id, s.version, s.ends_at FROM sessions s WHERE s.sid = c.sid LIMIT 1) s ON true
		   JOIN unnest($2::uuid[], $3::int[], $4::int[], $5::boolean[]) AS k (action_id, version, lim, clocked)
		     ON k.action_id = s.action_id AND k.version = s.version) AS u`
	args := []any{now, known.ActionIDs, known.Versions, known.Limits, known.Clocked}
	queuePending(b, rel, args, out, events)
	if !slices.Contains(known.Clocked, true) {
		return // no session of these versions keeps a clock
	}
	b.Queue(takenFiringsSQL(`sid IN (SELECT u.sid FROM `+rel+` WHERE u.clocked)`), args...).
		Query(func(rows pgx.Rows) error { return scanTakenFirings(rows, taken) })
}

// queuePending queues QueuePending's reads for the sessions of rel, an SQL
// relation u (sid, lim, ended) whose parameters are args ($1 on). The
// first read adds the entries of out that are missing.
func queuePending(b *pgx.Batch, rel string, args []any, out map[int64]*Pending, events map[uuid.UUID]ledger.Event) {
	entry := func(sid int64) *Pending {
		p := out[sid]
		if p == nil {
			p = &Pending{}
			out[sid] = p
		}
		return p
	}
	b.Queue(`SELECT u.sid, EXISTS (SELECT 1 FROM session_inputs i WHERE i.sid = u.sid AND i.status = 'PENDING' AND i.starts_turn)
		  FROM `+rel, args...).Query(func(rows pgx.Rows) error {
		var sid int64
		var starts bool
		_, err := pgx.ForEachRow(rows, []any{&sid, &starts}, func() error { entry(sid).Starts = starts; return nil })
		return err
	})
	collect := func(add func(p *Pending, in Input)) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			for rows.Next() {
				in, ev, err := ScanInputEvent(rows)
				if err != nil {
					return err
				}
				if ev != nil {
					events[ev.ID] = *ev
				}
				add(entry(in.SID), in)
			}
			return rows.Err()
		}
	}
	kind := fmt.Sprintf("$%d", len(args)+1)
	withKind := append(append([]any{}, args...), KindCommand)
	b.Queue(`SELECT `+InputEventColumns+` FROM session_inputs i LEFT JOIN events e ON e.id = i.event_id
		 WHERE i.sid IN (SELECT u.sid FROM `+rel+` WHERE NOT u.ended) AND i.status = 'PENDING' AND i.kind = `+kind+`
		 ORDER BY i.sid, i.seq`, withKind...).
		Query(collect(func(p *Pending, in Input) {
			if in.Command == nil || *in.Command == CommandAnswer {
				p.Commands = append(p.Commands, in)
			} else {
				p.Messages = append(p.Messages, in)
			}
		}))
	b.Queue(`SELECT `+InputEventColumns+`
		  FROM `+rel+`
		 CROSS JOIN LATERAL (
			SELECT * FROM session_inputs p
			 WHERE p.sid = u.sid AND p.status = 'PENDING'
			 ORDER BY p.seq
			 LIMIT 1 + CASE WHEN NOT u.ended THEN u.lim ELSE greatest(u.lim, (
				SELECT count(*) FROM session_inputs c WHERE c.sid = u.sid AND c.status = 'PENDING' AND c.seq <= (
					SELECT max(m.seq) FROM session_inputs m WHERE m.sid = u.sid AND m.status = 'PENDING' AND m.kind = `+kind+`))) END) i
		  LEFT JOIN events e ON e.id = i.event_id
		 ORDER BY i.sid, i.seq`, withKind...).
		Query(collect(func(p *Pending, in Input) { p.Inputs = append(p.Inputs, in) }))
}
