package session

// The values session rows hold, each declared once here. SQL in this
// package names them as literals where an index needs it (a partial index
// such as session_inputs_pending is used only by a query that spells its
// predicate out); every other package uses these constants.

// Status is a session's status. COMPLETED, FAILED and CANCELLED are final (T8).
type Status string

// Session statuses.
const (
	Open      Status = "OPEN"
	Waiting   Status = "WAITING"
	Completed Status = "COMPLETED"
	Failed    Status = "FAILED"
	Cancelled Status = "CANCELLED"
)

// Final reports whether no input is delivered any more (T8).
func (s Status) Final() bool { return s == Completed || s == Failed || s == Cancelled }

// Live reports whether the session still takes inputs: OPEN or WAITING.
func (s Status) Live() bool { return s == Open || s == Waiting }

// SessionKind tells sessions that run in turns from tool sessions (X1).
type SessionKind string

// Session kinds.
const (
	KindTurns SessionKind = "TURNS"
	KindTool  SessionKind = "TOOL"
)

// InputKind is the kind of an input (I1).
type InputKind string

// Input kinds (I1).
const (
	KindEvent    InputKind = "EVENT"
	KindCommand  InputKind = "COMMAND"
	KindCall     InputKind = "CALL"
	KindSchedule InputKind = "SCHEDULE"
	KindRequest  InputKind = "REQUEST"
)

// InputStatus is where an input is: PENDING until a turn takes it, then
// CONSUMED (the turn committed, T6) or RECEIVED (the turn was held, H2);
// a message deleted while pending is CANCELLED and no turn takes it (G2).
type InputStatus string

// Input statuses.
const (
	InputPending   InputStatus = "PENDING"
	InputConsumed  InputStatus = "CONSUMED"
	InputReceived  InputStatus = "RECEIVED"
	InputCancelled InputStatus = "CANCELLED"
)

// InterruptKind is what a waiting session waits on (P1, H2).
type InterruptKind string

// Interrupt kinds.
const (
	InterruptApproval InterruptKind = "APPROVAL"
	InterruptHold     InterruptKind = "HOLD"
)

// InterruptStatus is an interrupt's status: PENDING until answered once
// (ANSWERED, P5, H5) or no longer awaited (CLOSED: the session closed or a
// later turn stopped listing it).
type InterruptStatus string

// Interrupt statuses.
const (
	InterruptPending  InterruptStatus = "PENDING"
	InterruptAnswered InterruptStatus = "ANSWERED"
	InterruptClosed   InterruptStatus = "CLOSED"
)

// Decision answers an interrupt: APPROVE or DENY an approval (P5), RETRY
// or SKIP a hold (H3, H4).
type Decision string

// Decisions.
const (
	Approve Decision = "APPROVE"
	Deny    Decision = "DENY"
	Retry   Decision = "RETRY"
	Skip    Decision = "SKIP"
)

// HoldCause is why a turn was held (H1, H2).
type HoldCause string

// Hold causes.
const (
	CauseRefused    HoldCause = "REFUSED"
	CauseUnfinished HoldCause = "UNFINISHED"
	// CauseBudget: the session's spend cap (maxPerSessionUsd) stopped the
	// turn before a model call (G8); not retried.
	CauseBudget HoldCause = "BUDGET"
)

// Reasons a session records, stable codes.
const (
	// ReasonEnded: the session reached its end with nothing pending and
	// completed with no turn (E5).
	ReasonEnded = "ended"
)
