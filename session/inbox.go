package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

func (f InboxFilter) args() []any {
	readable := f.Readable
	if readable == nil {
		readable = []uuid.UUID{}
	}
	return []any{f.Kind, f.ActionID, f.AllActions, readable}
}

// inboxWhere filters by InboxFilter.args ($1-$4).
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
}

var inboxColumns = prefixed("i", interruptColumns) + ", " + prefixed("s", sessionColumns) +
	", coalesce(v.definition->>'name', ''), i.ord"

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
	err := row.Scan(&in.ID, &in.SID, &in.Kind, &in.Turn, &in.ExecutionID, &in.ToolActionID, &in.ToolVersion, &in.ToolName,
		&in.CallID, &in.Input, &in.Cause, &in.Category, &in.Explanation, &in.Status, &in.Decision, &in.Response,
		&in.Responder, &in.AnsweredAt, &in.CommandSeq, &in.CreatedAt,
		&s.SID, &s.ActionID, &s.ID, &s.Version, &s.Input, &s.State, &s.Status, &s.Reason,
		&s.OriginEventID, &s.StartedAt, &s.EndsAt, &s.CreatedAt, &s.UpdatedAt, &s.ClosedAt, &s.TurnCount, &s.LeaseExpires,
		&it.ActionName, &it.Ord)
	if err != nil {
		return it, err
	}
	in.CreatedAt = in.CreatedAt.UTC()
	in.AnsweredAt = utcPtr(in.AnsweredAt)
	s.StartedAt, s.CreatedAt, s.UpdatedAt = s.StartedAt.UTC(), s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	s.EndsAt, s.ClosedAt = utcPtr(s.EndsAt), utcPtr(s.ClosedAt)
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

// InboxChanges returns, in raised order, the interrupts f covers in the
// sessions of note (every session when note.All) that the note's
// transaction raised, or that are among known (the ones a subscriber holds
// as pending): what a subscriber needs to report RAISED, ANSWERED and
// CLOSED exactly once each.
func (st *Store) InboxChanges(ctx context.Context, f InboxFilter, note Note, known []uuid.UUID) ([]InboxItem, error) {
	if known == nil {
		known = []uuid.UUID{}
	}
	sids := note.SIDs
	if sids == nil {
		sids = []int64{}
	}
	args := append(f.args(), strconv.FormatUint(note.XID, 10), known, note.All, sids)
	rows, err := st.pool.Query(ctx, `SELECT `+inboxColumns+` FROM `+inboxFrom+`
		WHERE (i.raised_xid = $5::text::xid8 OR i.id = ANY($6::uuid[])) AND ($7::bool OR i.sid = ANY($8::bigint[]))
		  AND `+inboxWhere+` ORDER BY i.ord`, args...)
	if err != nil {
		return nil, fmt.Errorf("session: inbox changes: %w", err)
	}
	items, err := pgx.CollectRows(rows, scanInboxItem)
	if err != nil {
		return nil, fmt.Errorf("session: inbox changes: %w", err)
	}
	return items, nil
}

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
