package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/session"
)

// Who may answer an approval request (issue 11; docs/security.md "Who may
// answer"). RESPOND on the session's action (the agent) lets a principal
// deny any of its calls and answer its held turns; the field rule of
// respondToSession checks it. Approving lets the call run, so:
//   - when the tool's owner requires approval for every call (its
//     tool.approval is REQUIRED), approving also needs RESPOND on the tool
//     action: the owner's gate is answered by someone the owner lets answer;
//   - a replacement input is a call the approver makes, so it also needs
//     CALL on the tool action.
//
// A requirement that comes only from the agent's tool reference needs
// RESPOND on the agent alone. For a tool of an agent's MCP server the
// interrupt names the agent as its tool action (it is the agent's own
// config that gates it).

// answerRights is what p may do with approval request in of agent's
// session: approve it as it is, and approve it with a replacement input.
func (r *Resolver) answerRights(ctx context.Context, p auth.Principal, agent uuid.UUID, in *session.Interrupt) (approve, replace bool, err error) {
	if !p.Allows(auth.Respond, auth.ActionResource(agent)) {
		return false, false, nil
	}
	if in.ToolActionID == nil {
		return true, false, nil
	}
	tool := *in.ToolActionID
	owner, err := r.ownerRequiresApproval(ctx, tool, in.ToolVersion)
	if err != nil {
		return false, false, err
	}
	approve = !owner || p.Allows(auth.Respond, auth.ActionResource(tool))
	return approve, approve && p.Allows(auth.Call, auth.ActionResource(tool)), nil
}

// ownerRequiresApproval reports whether tool action id requires approval
// for every call, by the version the request names or by its current
// version (the one an approved call runs): either gate is the owner's.
func (r *Resolver) ownerRequiresApproval(ctx context.Context, id uuid.UUID, recorded *int) (bool, error) {
	required := func(v *action.Version) bool {
		return v != nil && v.Definition.Tool != nil && v.Definition.Tool.Approval == action.ApprovalRequired
	}
	if recorded != nil {
		v, err := r.version(ctx, id, *recorded)
		if err != nil || required(v) {
			return required(v), err
		}
	}
	a, err := r.action(ctx, id)
	if err != nil || a == nil {
		return false, err
	}
	v, err := r.version(ctx, id, a.CurrentVersion)
	return required(v), err
}

// answerCheck is respondToSession's session.AnswerCheck for p answering
// in a session of action agent: an approval p may not give as it is is
// refused with FORBIDDEN, naming the part of the answer that needs more
// and no tool.
func (r *Resolver) answerCheck(p auth.Principal, agent uuid.UUID) session.AnswerCheck {
	return func(ctx context.Context, in *session.Interrupt, resp session.Response) error {
		a := resp.Approval
		if in.Kind != session.InterruptApproval || a == nil || session.Decision(a.Decision) != session.Approve {
			return nil // denials and hold answers need RESPOND on the agent only
		}
		approve, replace, err := r.answerRights(ctx, p, agent, in)
		switch {
		case err != nil:
			return err
		case !approve:
			return fault.New(fault.Forbidden, "response.approval.decision",
				"not allowed: the tool's owner requires approval of every call, and approving it needs RESPOND on the tool action too (you may deny it)")
		case hasInput(a) && !replace:
			return fault.New(fault.Forbidden, "response.approval.input",
				"not allowed: a replacement input is a call you make, which needs CALL on the tool action (you may approve the call as it is)")
		}
		return nil
	}
}

func hasInput(a *session.ApprovalResponse) bool {
	return len(a.Input) > 0 && string(a.Input) != "null"
}

// approvalRights answers ApprovalRequest.mayApprove and mayReplaceInput
// for the caller: the session's action is the one of the execution that
// paused before the call.
func (r *Resolver) approvalRights(ctx context.Context, in *session.Interrupt) (approve, replace bool, err error) {
	p, ok := auth.From(ctx)
	if !ok || p.Session != nil {
		return false, false, nil
	}
	x, err := r.execution(ctx, in.ExecutionID)
	if err != nil || x == nil {
		return false, false, err
	}
	return r.answerRights(ctx, p, x.ActionID, in)
}
