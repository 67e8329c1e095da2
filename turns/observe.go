package turns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/actionsledger/actionsledger/internal/observe"
	"github.com/actionsledger/actionsledger/session"
)

// Codes of handler errors, the label of
// actionsledger_handler_errors_total (issue 12): a small fixed set, so the
// metric's cardinality stays bounded whatever handlers return.
const (
	CodeTimeout       = "timeout"        // the attempt passed TurnTimeout
	CodeCancelled     = "cancelled"      // the run was cancelled (lease lost, shutdown)
	CodePanic         = "panic"          // the handler panicked
	CodeInvalidOutput = "invalid_output" // the outcome broke the handler contract
	CodeUnfinished    = "unfinished"     // held: the handler could not finish (H1)
	CodeRefused       = "refused"        // held: the handler refused (H1)
	CodeBudget        = "budget"         // held: the session's spend cap (G8)
	CodeConfig        = "config"         // the kind or its config is unusable
	CodePermanent     = "permanent"      // any other error marked Permanent
	CodeTransient     = "transient"      // any other error (retried)
)

// ErrorCode classifies a handler's error by the codes above; "" for nil.
func ErrorCode(err error) string {
	var p panicError
	switch h := AsHold(err); {
	case err == nil:
		return ""
	case h != nil && h.Cause == CauseRefused:
		return CodeRefused
	case h != nil && h.Cause == CauseBudget:
		return CodeBudget
	case h != nil:
		return CodeUnfinished
	case errors.As(err, &p):
		return CodePanic
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCancelled
	case IsPermanent(err):
		return CodePermanent
	}
	return CodeTransient
}

// panicError is a handler's recovered panic.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.v) }

// settled reports a claimed turn once run is done with it (issue 12): a
// committed outcome is counted, logged at info (with the interrupts it
// raised) and set on the turn's span; a turn that did not commit (lease
// lost, shutting down, the commit failed) only ends its span, marked as an
// error.
func (e *Executor) settled(ctx context.Context, c *claim, err error) {
	d := time.Since(c.began)
	kind := ""
	if c.comp != nil {
		kind = c.comp.Def.Kind
	}
	if err != nil || c.outcome == "" {
		if err == nil {
			err = errors.New("turn not committed (lease lost or taken over)")
		}
		observe.End(c.span, err)
		return
	}
	e.Metrics.Turn(kind, string(c.outcome), len(c.inputs), d)
	e.Metrics.ClaimWait(c.waited)
	c.span.SetAttributes(observe.Outcome.String(string(c.outcome)), observe.ActionKind.String(kind), observe.Inputs.Int(len(c.inputs)))
	if c.outcome == "FAILED" {
		c.span.SetStatus(codes.Error, "turn failed")
	}
	c.span.End()
	attrs := []any{"action", c.sess.ActionID, "session", c.sess.ID, "turn", c.turn, "status", c.outcome,
		"attempts", c.attempt, "duration_ms", float64(d.Microseconds()) / 1000, "execution", c.execID}
	if id := observe.TraceID(ctx); id != "" {
		attrs = append(attrs, "trace", id)
	}
	e.log.Info("turn settled", attrs...)
	e.log.Debug("turn details", "execution", c.execID, "kind", kind, "inputs", len(c.inputs), "final", c.final,
		"retry_of", c.retryOf, "claim_wait", c.waited)
	for _, r := range c.raised {
		e.Metrics.Interrupt(string(r.kind), "raised")
		what := "tool"
		if r.kind != session.InterruptApproval {
			what = "cause"
		}
		e.log.Info("interrupt raised", "interrupt", r.id, "kind", r.kind, what, r.what,
			"action", c.sess.ActionID, "session", c.sess.ID, "turn", c.turn)
	}
}
