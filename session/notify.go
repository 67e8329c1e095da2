package session

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
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

// Returning gives the notice's session and inbox notifications as SQL
// select-list expressions (two columns) over parameters numbered from
// first, with their arguments, to ride on a statement the transaction runs
// anyway (a RETURNING list): no round trip of its own. Turns and Timers are
// the caller's.
func (n Notice) Returning(first int) (string, []any) {
	p := func(i int) string { return "$" + strconv.Itoa(first+i) }
	// Subselects: a function call in a RETURNING list of an UPDATE would
	// see the row, not the statement, and PostgreSQL evaluates a volatile
	// scalar subquery once per row; the statements here update one row.
	payload := `pg_current_xact_id()::text || ':' || ` + p(0) + `::text`
	return fmt.Sprintf(`(SELECT CASE WHEN %[1]s::text <> '' THEN pg_notify(%[2]s::text, %[4]s) END), `+
			`(SELECT CASE WHEN %[1]s::text <> '' AND %[3]s::bool THEN pg_notify(%[5]s::text, %[4]s) END)`,
			p(0), p(1), p(2), payload, p(3)),
		[]any{n.payload(), SessionsChannel, n.Interrupts, InboxChannel}
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
