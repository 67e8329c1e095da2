package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/session"
)

// interrupts lists a session's interrupts of one kind (approval requests
// or holds), optionally of one status.
func (r *actionSessionResolver) interrupts(ctx context.Context, obj *session.Session, kind session.InterruptKind, status *model.InterruptStatus) ([]session.Interrupt, error) {
	var st *session.InterruptStatus
	if status != nil {
		s := session.InterruptStatus(*status)
		st = &s
	}
	return r.SessionStore.Interrupts(ctx, obj.SID, kind, st)
}

// interruptResponse reads how an interrupt was answered; nil while it waits.
func (r *Resolver) interruptResponse(ctx context.Context, in *session.Interrupt) (*model.InterruptResponse, error) {
	a, err := session.ResponseOf(in)
	if err != nil || a == nil {
		return nil, err
	}
	out := &model.InterruptResponse{Decision: string(a.Decision), Input: a.Input, Responder: a.Responder, At: a.At}
	if a.Reason != "" {
		out.Reason = &a.Reason
	}
	if a.Note != "" {
		out.Note = &a.Note
	}
	if a.CommandSeq != nil && selects(ctx, "command") {
		if out.Command, err = r.SessionStore.InputBySeq(ctx, in.SID, *a.CommandSeq); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// selects reports whether the selection of the field being resolved asks
// for field name (a field read only for it need not be read otherwise:
// a subscription's update is marshalled once per subscriber). Without a
// field context it reports true.
func selects(ctx context.Context, name string) bool {
	if !graphql.HasOperationContext(ctx) || graphql.GetFieldContext(ctx) == nil {
		return true
	}
	for _, f := range graphql.CollectFieldsCtx(ctx, []string{"InterruptResponse"}) {
		if f.Name == name {
			return true
		}
	}
	return false
}
