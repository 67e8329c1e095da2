package turns

import "github.com/actionsledger/actionsledger/session"

// TurnStatus is a turn's status (T9).
type TurnStatus string

// Turn statuses. RUNNING until the turn settles.
const (
	TurnRunning   TurnStatus = "RUNNING"
	TurnCompleted TurnStatus = "COMPLETED"
	TurnFailed    TurnStatus = "FAILED"
	TurnHeld      TurnStatus = "HELD"
	TurnCancelled TurnStatus = "CANCELLED"
)

// ExecStatus is an execution's status.
type ExecStatus string

// Execution statuses. QUEUED is an execution of an action without a
// session block waiting to be claimed (issue 15); turns and tool calls
// start RUNNING.
const (
	ExecQueued    ExecStatus = "QUEUED"
	ExecRunning   ExecStatus = "RUNNING"
	ExecSucceeded ExecStatus = "SUCCEEDED"
	ExecFailed    ExecStatus = "FAILED"
	ExecHeld      ExecStatus = "HELD"
	ExecCancelled ExecStatus = "CANCELLED"
)

// FailureCode is the stable code that starts the error of a failed or
// held execution (T7, H1).
type FailureCode string

// Failure codes.
const (
	// FailOutputInvalid: the outcome broke the handler contract (T5, E2).
	FailOutputInvalid FailureCode = "action_output_invalid"
	// FailRefused: the model refused; the turn is held (H1).
	FailRefused FailureCode = "agent_refused"
	// FailUnfinished: no outcome after retries; the turn is held (H1).
	FailUnfinished FailureCode = "agent_unfinished"
	// FailBudget: the session's spend cap stopped the turn; it is held (G8).
	FailBudget FailureCode = "budget_exhausted"
	// FailKeyFailed: the concurrency key of an action without a session
	// block could not be evaluated for the event (issue 15); the execution
	// fails when it is queued.
	FailKeyFailed FailureCode = "concurrency_key_failed"
	// FailHandlerFailed: the handler of an execution without a session
	// reported FAILED (issue 15); not retried.
	FailHandlerFailed FailureCode = "handler_failed"
)

// Hold causes (H2), as package session declares them.
const (
	CauseRefused    = session.CauseRefused
	CauseUnfinished = session.CauseUnfinished
)

// cancelledWhileRunning is the error of an execution whose session was
// closed while its turn ran (T8).
const cancelledWhileRunning = "the session was closed while the turn ran"
