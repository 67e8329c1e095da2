package graph

import (
	"context"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/session"
)

// senderOf is who sends a command in this request (G1): a handler
// credential's session (AGENT), or the authenticated principal
// (OPERATOR). Never taken from the request's arguments.
func senderOf(ctx context.Context) session.Sender {
	p, _ := auth.From(ctx)
	if p.Session != nil {
		return session.Sender{Kind: session.SenderAgent, ID: p.ID}
	}
	return session.Sender{Kind: session.SenderOperator, ID: p.ID}
}

// sessionBySID reads a linked session (G5); nil for none.
func (r *Resolver) sessionBySID(ctx context.Context, sid *int64) (*session.Session, error) {
	if sid == nil {
		return nil, nil
	}
	return r.SessionStore.BySID(ctx, *sid)
}

// inputCommand is a COMMAND input's command (G1, G2); nil for others.
func (r *Resolver) inputCommand(ctx context.Context, in *session.Input) (*model.SessionCommand, error) {
	if in.Kind != session.KindCommand {
		return nil, nil
	}
	kind := session.CommandAnswer
	if in.Command != nil {
		kind = *in.Command
	}
	status, err := r.SessionStore.CommandStatusOf(ctx, in)
	if err != nil {
		return nil, err
	}
	c := &model.SessionCommand{Kind: model.CommandKind(kind), Message: in.Message, IdempotencyKey: in.IdempotencyKey,
		Status: model.CommandStatus(status), PromotedAt: in.PromotedAt, Changes: []session.InputChange{}}
	if in.SenderKind != nil && in.SenderID != nil {
		c.Sender = &session.Sender{Kind: *in.SenderKind, ID: *in.SenderID}
	}
	if kind == session.CommandMessage {
		if c.Changes, err = r.SessionStore.InputChanges(ctx, in.SID, in.Seq); err != nil {
			return nil, err
		}
	}
	return c, nil
}
