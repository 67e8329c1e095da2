// Package turns runs sessions in turns (SPEC T1-T9): the executor that
// claims runnable sessions, the contract handlers implement (handler.go),
// and the record of turns, executions and transcripts, the tables it
// owns. Session rows, inputs and interrupts belong to package session,
// whose lease-fenced functions the executor calls. A running turn's
// transcript entries are published as they are added, for subscribers
// (live.go, issue 12).
//
// # The pipeline
//
// Executor.Run keeps Workers turns in flight. One loop claims: when woken
// (a notification on session.TurnsChannel, a commit that left its session
// runnable, a poll) it leases as many runnable sessions as there are free
// slots in one claim of two round trips (claim.go): BEGIN, the lock of the
// sessions and, queued behind it, the reads (pending inputs with their
// events, RUNNING turns a dead worker left, taken firings; the statements
// find the locked sessions in a transaction-local setting,
// session.ClaimedSIDs), then the leases, new turns, executions and turn
// inputs with COMMIT. Sessions whose action version this process has not
// compiled yet are read in a round trip between the two. The claimed rows stay locked until that commit, so
// every input delivered before the claim is seen and one delivered during it
// waits for it.
//
// Each turn runs in a goroutine (retries, T7), its lease extended by one
// heartbeat statement per process (heartbeat.go). A finished turn whose
// handler began no transaction (no ledger write, no tool call; held and
// failed turns too) goes to the completer (commit.go), which commits
// whatever finished while its previous batch was in flight in one
// transaction of two round trips: BEGIN and the lock of the sessions with
// their lease check, then every write and COMMIT. A turn whose lease was
// taken over commits nothing while the others of its batch do. The batch
// waits for a session another transaction holds (a dispatch batch
// delivering to it) up to Config.SettleLockWait; past that, it commits
// again without the sessions still held (SKIP LOCKED), whose turns are
// then committed by themselves. A turn whose handler wrote to the ledger commits in
// the handler's transaction, by itself (T6). RunOnce claims one session
// and commits its turn by itself.
//
// A held turn's transcript is written with its record in a fresh
// transaction after its run's transaction rolled back (H1, HARD-PARTS 4).
//
// # Executions without a session
//
// An action without a session block runs one execution per matching event
// (issue 15, sessionless.go; docs/executions.md). The dispatcher queues them
// through QueueMatches; the same loop claims them into the same slots
// (alternating with turns when both wait), leasing the execution row
// itself, and admits them into concurrency groups under an advisory lock
// per group. Each commits by itself: in the handler's transaction when it
// began one, else in one round trip of its own. RunExecutionOnce claims
// and runs one.
//
// docs/throughput.md has the measured cost.
package turns
