package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/ledger"
)

// InboxFilter chooses the interrupts an inbox covers (issue 12): those of
// the actions the caller may read (every action, or the ones listed),
// optionally of one kind and one action.
type InboxFilter struct {
	// Kind is InterruptApproval or InterruptHold; nil for both.
	Kind *string
	// ActionID keeps one action's interrupts; nil for every action.
	ActionID *uuid.UUID
	// AllActions: the caller may read every action. Otherwise only the
	// interrupts of Readable are covered (none when it is empty).
	AllActions bool
	Readable   []uuid.UUID
}

// Covers reports whether f covers it, as the SQL filter of Inbox and
// InboxPending does (inboxWhere): of f's kind and action, when set, and
// of an action the caller may read.
func (f InboxFilter) Covers(it *InboxItem) bool {
	switch {
	case f.Kind != nil && string(it.Kind) != *f.Kind:
		return false
	case f.ActionID != nil && it.Session.ActionID != *f.ActionID:
		return false
	}
	return f.AllActions || slices.Contains(f.Readable, it.Session.ActionID)
}

func (f InboxFilter) args() []any {
	readable := f.Readable
	if readable == nil {
		readable = []uuid.UUID{}
	}
	return []any{f.Kind, f.ActionID, f.AllActions, readable}
}

// inboxWhere filters by InboxFilter.args ($1-$4); InboxFilter.Covers is
// the same filter in memory.
const inboxWhere = `($1::text IS NULL OR i.kind = $1) AND ($2::uuid IS NULL OR s.action_id = $2)
	AND ($3::bool OR s.action_id = ANY($4::uuid[]))`

// InboxItem is an interrupt with its session and the name of its action
// (of the session's version), as the inbox lists it.
type InboxItem struct {
	Interrupt
	Session    *Session
	ActionName string
	// Ord orders interrupts as they were raised (the inbox's cursor).
	Ord int64
	// Action is the item's action when its reader read it along (the
	// inboxUpdates reader does, once for all its subscribers); nil
	// otherwise.
	Action *action.Action
}

var inboxColumns = prefixed("i", interruptColumns) + ", " + prefixed("s", sessionColumns) +
	", coalesce(v.definition->>'name', ''), i.ord" +
	", coalesce((SELECT t.resume IS NOT NULL FROM session_turns t WHERE t.sid = i.sid AND t.number = i.turn), false)"

const inboxFrom = `session_interrupts i
	JOIN sessions s ON s.sid = i.sid
	JOIN action_versions v ON v.action_id = s.action_id AND v.version = s.version`

// prefixed qualifies each column of a column list with table alias t.
func prefixed(t, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = t + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

func scanInboxItem(row pgx.CollectableRow) (InboxItem, error) {
	var it InboxItem
	var in Interrupt
	var s Session
	var resumed bool
	dests := []any{&in.ID, &in.SID, &in.Kind, &in.Turn, &in.ExecutionID, &in.ToolActionID, &in.ToolVersion, &in.ToolName,
		&in.CallID, &in.Input, &in.Cause, &in.Category, &in.Explanation, &in.Status, &in.Decision, &in.Response,
		&in.Responder, &in.AnsweredAt, &in.CommandSeq, &in.CreatedAt}
	dests = append(append(dests, s.dests()...), &it.ActionName, &it.Ord, &resumed)
	err := row.Scan(dests...)
	if err != nil {
		return it, err
	}
	in.CreatedAt = in.CreatedAt.UTC()
	in.AnsweredAt = utcPtr(in.AnsweredAt)
	in.TurnResumed = &resumed
	s.utc()
	it.Interrupt, it.Session = in, &s
	return it, nil
}

// Inbox pages the pending interrupts f covers, oldest first (by Ord),
// after afterOrd (0 for the start), and counts them all. It is one
// statement, unless the page is empty after a cursor (then the count is a
// second).
func (st *Store) Inbox(ctx context.Context, f InboxFilter, afterOrd int64, limit int) ([]InboxItem, int, error) {
	args := append(f.args(), afterOrd, limit)
	rows, err := st.pool.Query(ctx, `
		WITH f AS (
			SELECT i.id, i.ord, count(*) OVER () AS total
			  FROM session_interrupts i JOIN sessions s ON s.sid = i.sid
			 WHERE i.status = 'PENDING' AND `+inboxWhere+`)
		SELECT f.total, `+inboxColumns+`
		  FROM f JOIN session_interrupts i ON i.id = f.id
		  JOIN sessions s ON s.sid = i.sid
		  JOIN action_versions v ON v.action_id = s.action_id AND v.version = s.version
		 WHERE f.ord > $5
		 ORDER BY f.ord LIMIT $6`, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("session: inbox: %w", err)
	}
	total := 0
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (InboxItem, error) {
		return scanInboxItem(totalRow{row, &total})
	})
	if err != nil {
		return nil, 0, fmt.Errorf("session: inbox: %w", err)
	}
	if len(items) == 0 && afterOrd > 0 {
		err := st.pool.QueryRow(ctx, `SELECT count(*) FROM session_interrupts i JOIN sessions s ON s.sid = i.sid
			WHERE i.status = 'PENDING' AND `+inboxWhere, f.args()...).Scan(&total)
		if err != nil {
			return nil, 0, fmt.Errorf("session: inbox: %w", err)
		}
	}
	return items, total, nil
}

// totalRow scans a leading count column into total, then the rest.
type totalRow struct {
	pgx.CollectableRow
	total *int
}

func (r totalRow) Scan(dest ...any) error {
	return r.CollectableRow.Scan(append([]any{r.total}, dest...)...)
}

// InboxPending returns the pending interrupts f covers (id to session key)
// and the snapshot the statement read them with: the state an inboxUpdates
// subscriber starts from. Notifications of transactions the snapshot saw
// are already in it.
func (st *Store) InboxPending(ctx context.Context, f InboxFilter) (map[uuid.UUID]int64, ledger.Snapshot, error) {
	var snap string
	var ids []uuid.UUID
	var sids []int64
	err := st.pool.QueryRow(ctx, `SELECT pg_current_snapshot()::text,
			coalesce(array_agg(i.id ORDER BY i.ord), '{}'), coalesce(array_agg(i.sid ORDER BY i.ord), '{}')
		  FROM session_interrupts i JOIN sessions s ON s.sid = i.sid
		 WHERE i.status = 'PENDING' AND `+inboxWhere, f.args()...).Scan(&snap, &ids, &sids)
	if err != nil {
		return nil, ledger.Snapshot{}, fmt.Errorf("session: inbox: %w", err)
	}
	s, err := ledger.ParseSnapshot(snap)
	if err != nil {
		return nil, ledger.Snapshot{}, err
	}
	out := make(map[uuid.UUID]int64, len(ids))
	for i, id := range ids {
		out[id] = sids[i]
	}
	return out, s, nil
}

// InboxChange is an interrupt a notification's transaction may have
// changed, as InboxNoteChanges reads it.
type InboxChange struct {
	InboxItem
	// Raised: the notification's transaction raised it.
	Raised bool
}

// InboxNoteChanges returns, in raised order, the interrupts of the
// sessions of note (every session when note.All) that the note's
// transaction raised, or that are among pending (the ones the reader
// holds as pending), whoever may read them: the one read an inboxUpdates
// reader makes per notification for all its subscribers, each of which
// keeps what its InboxFilter covers (Covers) to report RAISED, ANSWERED
// and CLOSED exactly once each.
func (st *Store) InboxNoteChanges(ctx context.Context, note Note, pending []uuid.UUID) ([]InboxChange, error) {
	if pending == nil {
		pending = []uuid.UUID{}
	}
	sids := note.SIDs
	if sids == nil {
		sids = []int64{}
	}
	rows, err := st.pool.Query(ctx, `SELECT `+inboxColumns+`, i.raised_xid = $1::text::xid8 FROM `+inboxFrom+`
		WHERE (i.raised_xid = $1::text::xid8 OR i.id = ANY($2::uuid[])) AND ($3::bool OR i.sid = ANY($4::bigint[]))
		ORDER BY i.ord`, strconv.FormatUint(note.XID, 10), pending, note.All, sids)
	if err != nil {
		return nil, fmt.Errorf("session: inbox changes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (InboxChange, error) {
		var c InboxChange
		var err error
		c.InboxItem, err = scanInboxItem(raisedRow{row, &c.Raised})
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("session: inbox changes: %w", err)
	}
	return out, nil
}

// raisedRow scans a trailing boolean column into raised.
type raisedRow struct {
	pgx.CollectableRow
	raised *bool
}

func (r raisedRow) Scan(dest ...any) error { return r.CollectableRow.Scan(append(dest, r.raised)...) }

// ReadConsistent runs fn in a read-only transaction whose statements all
// see one snapshot (REPEATABLE READ): a subscriber reading a session and
// its turns sees them as one commit left them.
func (st *Store) ReadConsistent(ctx context.Context, fn func(q ledger.Querier) error) error {
	return pgx.BeginTxFunc(ctx, st.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(tx) })
}

// Watch reads a session for a subscriber through q: the session (nil when
// there is none) and how many of its inputs are pending, in one statement.
func Watch(ctx context.Context, q ledger.Querier, sid int64) (*Session, int, error) {
	var pending int
	row := q.QueryRow(ctx, `SELECT `+sessionColumns+`,
		(SELECT count(*) FROM session_inputs WHERE sid = $1 AND status = 'PENDING') FROM sessions WHERE sid = $1`, sid)
	s, err := scanSession(pendingRow{row, &pending})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("session: watch: %w", err)
	}
	return s, pending, nil
}

// pendingRow scans a trailing count column into n.
type pendingRow struct {
	pgx.Row
	n *int
}

func (r pendingRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.n)...) }
