// Package session owns sessions (SPEC S1-S6, I3) and is the only writer of
// their rows, their inputs, their interrupts and their timers: the
// dispatcher that matches committed ledger events against triggers and
// starts or resumes sessions, the inputs delivered to them, intake records
// for events that could not be delivered, answers to interrupts
// (respond.go), closing by an operator, the session clock and timers, the
// notifications of session and interrupt changes that drive subscriptions
// (Notice, notify.go) and the inbox of pending interrupts (inbox.go).
//
// # The turn executor's side
//
// Package turns runs turns but writes no session row. What a turn does to
// its session goes through the functions of lease.go, pending.go and
// settle.go, each fenced by the lease's token (HARD-PARTS 3):
//
//   - QueueClaim takes up to n runnable sessions in one statement (FOR NO
//     KEY UPDATE SKIP LOCKED) with the next token, writing nothing;
//     QueuePending and QueueTakenFirings read what their turns are planned
//     from; QueueStartTurns, QueueLease, QueueStandDown, QueueHold and
//     QueueCompleteAtEnd (E5) record the outcome of the claim, each
//     session's in one update that installs the token.
//   - Extend is the heartbeat of every running turn of a process in one
//     statement; Release gives a lease up.
//   - QueueFence locks the sessions of finished turns and checks their
//     leases; QueueSettle then consumes or receives their inputs, raises and
//     closes interrupts (P1, P2, H2), writes state, status, reason and
//     continuation (T6, T7), decides the next turn, ends the lease, drops
//     the timers of sessions that closed, and leaves what to announce in
//     an Announcement that the executor posts once committed (issue 14).
//
// They queue statements in a pgx.Batch rather than run them: the executor
// sends the statements of many sessions, and of its own tables, in one
// round trip, in a transaction whose BEGIN and COMMIT ride in the same
// batches. Statements are set-based (unnest of parallel arrays), so a batch
// of k turns costs the statements of one.
//
// Settling several turns at once waits for their sessions' locks for a
// bounded time (WaitUpTo), then skips the sessions still held (SkipLocked),
// so it never sits out a deadlock timeout behind the dispatcher, which
// locks sessions in event order; a turn whose session was skipped is
// settled by itself afterwards, waiting like any one-row writer. A batch
// whose outcomes were decided from the claims' reads locks with
// QueueFenceCheck instead of QueueFence: one round trip, failing before any
// write when a session changed meanwhile (IsSessionChanged), after which
// the batch is settled the usual way.
//
// # Values and SQL
//
// Statuses, kinds, decisions and hold causes are typed values declared once
// (status.go). The SQL sits next to the function that runs it; literals of
// those values remain only where a partial index needs its predicate spelled
// out (status = 'PENDING'). sqlc was considered and not used: its generated
// functions run one statement each (its batch mode batches one query), while
// the pipeline's point is to send different statements together.
package session
