package session

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actionsledger/actionsledger/ledger"
)

// Notification channels of session changes (issue 12: subscriptions). A
// transaction that changes what sessionUpdates or inboxUpdates shows sends
// one notification per channel as it commits (Notice.Send), whatever the
// number of rows it wrote. The payload is tiny: "<xid>:<sids>", the
// committing transaction's id (pg_current_xact_id()) and the internal keys
// of the sessions it changed, comma-separated, or "*" when they would not
// fit. Like every notification it is only a wake-up: subscribers read the
// sessions again.
const (
	// SessionsChannel: a session's status, state, turns or inputs changed.
	SessionsChannel = "actionsledger_sessions"
	// InboxChannel: a session's interrupts were raised, answered or closed.
	InboxChannel = "actionsledger_inbox"
)

// maxNoteSIDs is the payload budget for the session list, in bytes (a
// payload must stay under 8000 bytes).
const maxNoteSIDs = 7000

// Execer runs a statement: a transaction, a connection or a pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Notice is what a transaction tells other processes when it commits: the
// sessions it changed (SessionsChannel), whether their interrupts changed
// (InboxChannel too), and whether the turn executor (TurnsChannel), the
// timer loop (TimersChannel) or the executor's sessionless side
// (ExecutionsChannel) should look.
type Notice struct {
	SIDs       []int64
	Interrupts bool
	Turns      bool
	Timers     bool
	// Executions: executions of actions without a session block were
	// queued (ExecutionsChannel, issue 15).
	Executions bool
}

// Session adds a changed session (once).
func (n *Notice) Session(sid int64) {
	if !slices.Contains(n.SIDs, sid) {
		n.SIDs = append(n.SIDs, sid)
	}
}

// Send queues the notice's notifications in tx with one statement; they
// are delivered if and when tx commits. A notice with nothing to say sends
// nothing.
func (n Notice) Send(ctx context.Context, tx Execer) error {
	sql, args, ok := n.statement()
	if !ok {
		return nil
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("session: notify: %w", err)
	}
	return nil
}

// Post hands the notice's notifications to nt, for a transaction that has
// committed (issue 14: the hot paths notify outside their transactions;
// see ledger.Notifier); xid is that transaction's id, as
// pg_current_xact_id() gave it (XIDColumn). A notice with nothing to say
// posts nothing.
func (n Notice) Post(nt *ledger.Notifier, xid string) {
	if sids := n.payload(); sids != "" {
		nt.Notify(SessionsChannel, xid+":"+sids)
		if n.Interrupts {
			nt.Notify(InboxChannel, xid+":"+sids)
		}
	}
	if n.Turns {
		nt.Wake(TurnsChannel)
	}
	if n.Timers {
		nt.Wake(TimersChannel)
	}
	if n.Executions {
		nt.Wake(ExecutionsChannel)
	}
}

// XIDColumn is a select-list expression giving the transaction's id as
// text, for Post: ride it on a statement the transaction runs anyway.
const XIDColumn = `pg_current_xact_id()::text`

// Announcement is what a transaction will announce once it commits
// (issue 14): a notice, and the transaction's id as QueueXID reads it.
type Announcement struct {
	Notice
	XID string
}

// QueueXID queues the read of the transaction's id into a.XID.
func (a *Announcement) QueueXID(b *pgx.Batch) {
	b.Queue(`SELECT ` + XIDColumn).QueryRow(func(r pgx.Row) error { return r.Scan(&a.XID) })
}

// Post hands the announcement to nt: call it once the transaction has
// committed.
func (a *Announcement) Post(nt *ledger.Notifier) { a.Notice.Post(nt, a.XID) }

// statement is the one statement that sends the notice; ok is false when
// it has nothing to say.
func (n Notice) statement() (sql string, args []any, ok bool) {
	sids := n.payload()
	if sids == "" && !n.Turns && !n.Timers && !n.Executions {
		return "", nil, false
	}
	return `SELECT
		CASE WHEN $1 <> '' THEN pg_notify($2, pg_current_xact_id()::text || ':' || $1) END,
		CASE WHEN $1 <> '' AND $3 THEN pg_notify($4, pg_current_xact_id()::text || ':' || $1) END,
		CASE WHEN $5 THEN pg_notify($6, '') END,
		CASE WHEN $7 THEN pg_notify($8, '') END,
		CASE WHEN $9 THEN pg_notify($10, '') END`,
		[]any{sids, SessionsChannel, n.Interrupts, InboxChannel, n.Turns, TurnsChannel, n.Timers, TimersChannel,
			n.Executions, ExecutionsChannel}, true
}

func (n Notice) payload() string {
	if len(n.SIDs) == 0 {
		return ""
	}
	var b strings.Builder
	for i, sid := range n.SIDs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(sid, 10))
		if b.Len() > maxNoteSIDs {
			return "*"
		}
	}
	return b.String()
}

// Note is a parsed SessionsChannel or InboxChannel payload.
type Note struct {
	// XID is the committing transaction's id (see ledger.Snapshot.Saw).
	XID uint64
	// SIDs are the sessions it changed, unless All.
	SIDs []int64
	All  bool
}

// ParseNote reads a SessionsChannel or InboxChannel payload.
func ParseNote(payload string) (Note, error) {
	x, list, ok := strings.Cut(payload, ":")
	if !ok {
		return Note{}, fmt.Errorf("session: note %q: no transaction id", payload)
	}
	xid, err := strconv.ParseUint(x, 10, 64)
	if err != nil {
		return Note{}, fmt.Errorf("session: note %q: %w", payload, err)
	}
	n := Note{XID: xid}
	if list == "*" {
		n.All = true
		return n, nil
	}
	for _, s := range strings.Split(list, ",") {
		sid, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Note{}, fmt.Errorf("session: note %q: %w", payload, err)
		}
		n.SIDs = append(n.SIDs, sid)
	}
	return n, nil
}

// NoteKeys routes SessionsChannel and InboxChannel notes in a ledger.Feed:
// its keys are the session keys (SIDKey).
func NoteKeys(payload string) ([]string, bool) {
	_, list, _ := strings.Cut(payload, ":")
	if list == "*" {
		return nil, true
	}
	return strings.Split(list, ","), false
}

// SIDKey is a session's key in the feed (its internal key in decimal).
func SIDKey(sid int64) string { return strconv.FormatInt(sid, 10) }
