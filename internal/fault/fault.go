// Package fault is the project's one error vocabulary. Domain packages return
// *fault.Error values (or wrap them); the GraphQL presenter maps Code to
// extensions.code and Field to extensions.field. Any other error reaching the
// presenter is reported as INTERNAL without its text.
package fault

import (
	"errors"
	"fmt"
)

// Stable error codes, shown to clients as extensions.code. Never rename one.
const (
	// BadInput: an argument is malformed (wrong shape, too long, bad characters).
	BadInput = "BAD_USER_INPUT"
	// InvalidJSON: a JSON value cannot be stored (NUL character, too deep, too large).
	InvalidJSON = "INVALID_JSON"
	// PayloadTooLarge: a value or request exceeds a documented size limit.
	PayloadTooLarge = "PAYLOAD_TOO_LARGE"
	// InvalidExpression: a CEL expression does not parse or type-check (A3).
	InvalidExpression = "INVALID_EXPRESSION"
	// InvalidSchema: an inputSchema is not a valid JSON Schema (A3).
	InvalidSchema = "INVALID_SCHEMA"
	// InvalidAction: an action definition breaks a rule of A3; Field names where.
	InvalidAction = "INVALID_ACTION"
	// UnknownKind: the handler kind is not registered.
	UnknownKind = "UNKNOWN_KIND"
	// InvalidConfig: the handler config is not valid for its kind.
	InvalidConfig = "INVALID_CONFIG"
	// ActionExists: createAction with an id that already holds a different definition.
	ActionExists = "ACTION_EXISTS"
	// NotFound: the addressed action, session, record or event does not exist.
	NotFound = "NOT_FOUND"
	// SessionClosed: the session is COMPLETED, FAILED or CANCELLED (T8).
	SessionClosed = "SESSION_CLOSED"
	// IdempotencyConflict: an idempotency key was reused for a different request (L3).
	IdempotencyConflict = "IDEMPOTENCY_CONFLICT"
	// ReservedEventType: the event type is written only by the service itself.
	ReservedEventType = "RESERVED_EVENT_TYPE"
	// ActionInactive: a call to a tool action that is DISABLED or ARCHIVED.
	ActionInactive = "ACTION_INACTIVE"
	// NotATool: callTool on an action without a tool block.
	NotATool = "NOT_A_TOOL"
	// SessionInputConflict: a tool session exists with a different input (X3).
	SessionInputConflict = "SESSION_INPUT_CONFLICT"
	// CallFailed: a tool's code failed; the message says why.
	CallFailed = "TOOL_CALL_FAILED"
	// AlreadyAnswered: respondToSession on an interrupt that was answered
	// before (P5, H5: each is answered once).
	AlreadyAnswered = "ALREADY_ANSWERED"
	// InterruptStale: respondToSession on an interrupt the session no longer
	// waits on (a later turn went on without it).
	InterruptStale = "INTERRUPT_STALE"
	// SessionHeld: an approval answered while the session holds a turn;
	// answer the hold first (H2).
	SessionHeld = "SESSION_HELD"
	// SkipNotAllowed: SKIP for a held turn that resumed from approval
	// responses (H4): retry it or close the session.
	SkipNotAllowed = "SKIP_NOT_ALLOWED"
	// ApprovalRequired: a handler called a tool whose owner requires a
	// person's approval for every call, outside an approved agent call
	// (issue 11).
	ApprovalRequired = "APPROVAL_REQUIRED"
	// NotRetryable: retryExecution on an execution that cannot be retried:
	// it is not FAILED, or its concurrency key failed to evaluate (issue 15).
	NotRetryable = "EXECUTION_NOT_RETRYABLE"
	// NotResumable: resumeSession on a session that does not wait after a
	// failed turn (G4, G10).
	NotResumable = "SESSION_NOT_RESUMABLE"
	// TurnNotRunning: an interrupt of a session none of whose turns is
	// running (G9).
	TurnNotRunning = "TURN_NOT_RUNNING"
	// InputNotPending: an edit, delete or promote of a message that a turn
	// took or that was deleted (G2).
	InputNotPending = "INPUT_NOT_PENDING"
	// SlotTaken: startSession of a singleton whose slot a live session holds
	// (G7); the message names that session.
	SlotTaken = "SESSION_SLOT_TAKEN"
	// SessionNotRetryable: retrySession of a session that is not FAILED (G5).
	SessionNotRetryable = "SESSION_NOT_RETRYABLE"
	// NotImplemented: the feature is recognised but not available in this build.
	NotImplemented = "NOT_IMPLEMENTED"
	// IntrospectionDisabled: the operation selects __schema or __type on a
	// server started with introspection turned off.
	IntrospectionDisabled = "INTROSPECTION_DISABLED"
	// Forbidden: the principal may not do this.
	Forbidden = "FORBIDDEN"
	// Unauthenticated: authorisation is on and the request has no valid
	// bearer token (HTTP 401).
	Unauthenticated = "UNAUTHENTICATED"
	// Unavailable: the database could not be reached or dropped the
	// connection (issue 10 item 7). The error carries extensions.retryable
	// true. A read can be retried as it is; a write may or may not have
	// committed, so retry it with the same idempotency key (L3) to be safe.
	Unavailable = "UNAVAILABLE"
	// Timeout: the request ran out of time (the request timeout, or its
	// body was not received in time) or was cancelled; retryable. As with
	// Unavailable, a write may have committed: retry with its idempotency key.
	Timeout = "TIMEOUT"
	// ComplexityLimit: the operation would cost too much: its complexity
	// exceeds the limit, or, with its fragments expanded, it is too large to
	// validate (issue 10 item 1).
	ComplexityLimit = "COMPLEXITY_LIMIT_EXCEEDED"
	// DepthLimit: the operation's selections nest deeper than the limit.
	DepthLimit = "DEPTH_LIMIT_EXCEEDED"
	// MutationLimit: the operation selects more mutation fields than one
	// request may run (issue 10 item 8); nothing ran.
	MutationLimit = "MUTATION_LIMIT_EXCEEDED"
	// MethodNotAllowed: the HTTP method cannot carry this request: a
	// mutation sent with GET, or a method other than GET, POST, OPTIONS and
	// HEAD (HTTP 405, issue 10 item 10).
	MethodNotAllowed = "METHOD_NOT_ALLOWED"
	// SubscriptionLagged: a subscription fell behind and what it missed
	// cannot be read back from the database (transcript entries of a
	// running turn, inbox changes), so it ended; subscribing again works
	// (issue 12). Retryable.
	SubscriptionLagged = "SUBSCRIPTION_LAGGED"
	// SubscriptionLimit: a connection or the server holds as many
	// subscriptions (streams) as it may (issue 12).
	SubscriptionLimit = "SUBSCRIPTION_LIMIT_EXCEEDED"
	// RequestSkipped: an MCP request to an action served over MCP gets no
	// answer: the held turn that took it was answered SKIP (issue 17, I4).
	RequestSkipped = "REQUEST_SKIPPED"
	// UpstreamUnavailable: an external server an action uses (an agent's
	// MCP server, issue 17) could not be reached, broke the connection or
	// did not answer in time. Retryable.
	UpstreamUnavailable = "UPSTREAM_UNAVAILABLE"
	// Internal: anything unexpected; details are logged, never shown.
	Internal = "INTERNAL"
)

// Retryable reports whether code names a condition that may pass if the
// same request is sent again later (Unavailable, Timeout, SubscriptionLagged,
// UpstreamUnavailable); clients see it as extensions.retryable.
func Retryable(code string) bool {
	return code == Unavailable || code == Timeout || code == SubscriptionLagged || code == UpstreamUnavailable
}

// Error is a client-facing error: a stable Code, the offending Field as a
// dotted path into the request (may be empty), and a human Message.
type Error struct {
	Code    string
	Field   string
	Message string
	Err     error // optional cause, never shown to clients
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with the given code, field and formatted message.
func New(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	return nil
}

// CodeOf returns the code of the *Error in err's chain, or Internal.
func CodeOf(err error) string {
	if fe := As(err); fe != nil {
		return fe.Code
	}
	return Internal
}

// WithField returns a copy of err (when it is an *Error) whose Field is
// prefixed by prefix, so nested validators can report full paths.
func WithField(err error, prefix string) error {
	fe := As(err)
	if fe == nil {
		return err
	}
	c := *fe
	switch {
	case c.Field == "":
		c.Field = prefix
	case prefix != "":
		c.Field = prefix + "." + c.Field
	}
	return &c
}
