package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/actionsledger/actionsledger/client"
)

// InboxCmd is `inbox [--kind approval|hold] [--action ID]`: the unanswered
// approval requests and held turns, oldest first (issue 12).
type InboxCmd struct {
	Kind   string `placeholder:"approval|hold" help:"Only approvals or only held turns."`
	Action string `placeholder:"ID" help:"Only this action's."`
	Limit  int    `default:"100" help:"Most items to list; 0 lists them all."`
}

// Validate checks --kind and --limit.
func (c *InboxCmd) Validate() error {
	if k := upper(c.Kind); k != "" && k != "APPROVAL" && k != "HOLD" {
		return fmt.Errorf("--kind %q: approval or hold", c.Kind)
	}
	if c.Limit < 0 {
		return errors.New("--limit must be 0 or more")
	}
	return nil
}

// Run pages through the inbox; JSON output is an array of items.
func (c *InboxCmd) Run(ctx context.Context, env *Env) error {
	var kind *client.InterruptKind
	if c.Kind != "" {
		k := client.InterruptKind(upper(c.Kind))
		kind = &k
	}
	var all []client.InboxItem
	var after *string
	total := 0
	for {
		r, err := client.Inbox(ctx, env.Client, pageSize(c.Limit, len(all)), after, kind, ptr(c.Action))
		if err != nil {
			return err
		}
		page := r.Actions.Inbox
		total = page.TotalCount
		all = append(all, page.Nodes...)
		if !page.PageInfo.HasNextPage || (c.Limit > 0 && len(all) >= c.Limit) {
			break
		}
		after = page.PageInfo.EndCursor
	}
	if all == nil {
		all = []client.InboxItem{}
	}
	return env.emit(all, func(w io.Writer) error {
		t := newTable(w, "INTERRUPT", "KIND", "ACTION", "SESSION", "RAISED", "WHAT")
		for _, it := range all {
			t.row(it.InterruptId, string(it.Kind), it.ActionName+" "+it.Action.Id, it.Session.Id, stamp(it.RaisedAt), clip(asked(&it), 80))
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "%d waiting", total)
		if total > len(all) {
			fmt.Fprintf(env.Stderr, " (first %d shown; --limit 0 lists all)", len(all))
		}
		// The decisions offered are those of the kinds listed: an approval
		// takes --approve or --deny, a held turn --retry or --skip.
		var decisions []string
		if slices.ContainsFunc(all, func(it client.InboxItem) bool { return it.Approval != nil }) {
			decisions = append(decisions, "--approve", "--deny")
		}
		if slices.ContainsFunc(all, func(it client.InboxItem) bool { return it.Hold != nil }) {
			decisions = append(decisions, "--retry", "--skip")
		}
		if len(decisions) == 0 {
			fmt.Fprintln(env.Stderr)
			return nil
		}
		fmt.Fprintf(env.Stderr, "; answer with: actionsledger respond ACTION SESSION INTERRUPT %s\n", strings.Join(decisions, "|"))
		return nil
	})
}

// asked says what an inbox item asks for, on one line.
func asked(it *client.InboxItem) string {
	if a := it.Approval; a != nil {
		return fmt.Sprintf("%s v%d %s", a.Tool, a.ToolVersion, compact(a.Input))
	}
	if h := it.Hold; h != nil {
		s := fmt.Sprintf("turn %d %s", h.Turn, h.Cause)
		if h.Category != nil {
			s += " (" + *h.Category + ")"
		}
		if h.Explanation != nil {
			s += ": " + oneLine(*h.Explanation)
		}
		return s
	}
	return ""
}

// RespondCmd is `respond ACTION SESSION INTERRUPT` with one decision: it
// answers an approval request (P5) or a held turn (H3, H4).
type RespondCmd struct {
	Action    string `arg:"" help:"The action's id."`
	Session   string `arg:"" help:"The session's id."`
	Interrupt string `arg:"" help:"The interrupt's id (from inbox or sessions get)."`

	Approve bool   `help:"Approval: run the call."`
	Deny    bool   `help:"Approval: do not run it; the agent is told, with --reason."`
	Reason  string `help:"Approval: why (the agent sees it)."`
	Input   string `placeholder:"JSON" help:"Approval with --approve: a JSON object replacing the call's input."`
	Retry   bool   `help:"Held turn: run its inputs again in a new turn."`
	Skip    bool   `help:"Held turn: go on without its inputs."`
	Note    string `help:"Held turn: a note shown to the agent."`
}

// Validate requires exactly one decision and only the options that go
// with it.
func (c *RespondCmd) Validate() error {
	n := 0
	for _, b := range []bool{c.Approve, c.Deny, c.Retry, c.Skip} {
		if b {
			n++
		}
	}
	switch {
	case n == 0:
		return errors.New("give a decision: --approve or --deny for an approval, --retry or --skip for a held turn")
	case n > 1:
		return errors.New("give exactly one of --approve, --deny, --retry and --skip")
	case c.Note != "" && (c.Approve || c.Deny):
		return errors.New("--note goes with --retry or --skip; an approval takes --reason")
	case c.Reason != "" && (c.Retry || c.Skip):
		return errors.New("--reason goes with --approve or --deny; a held turn takes --note")
	case c.Input != "" && !c.Approve:
		return errors.New("--input goes with --approve")
	case c.Input != "" && !isJSONObject(c.Input):
		return errors.New("--input must be a JSON object, e.g. '{\"account_id\": \"3f0c9f8e\"}'")
	}
	return nil
}

func isJSONObject(s string) bool {
	return json.Valid([]byte(s)) && strings.HasPrefix(strings.TrimSpace(s), "{")
}

// response builds the answer from the flags.
func (c *RespondCmd) response() client.SessionResponseInput {
	switch {
	case c.Approve || c.Deny:
		a := &client.ApprovalResponseInput{Decision: client.ApprovalDecisionApprove, Reason: ptr(c.Reason)}
		if c.Deny {
			a.Decision = client.ApprovalDecisionDeny
		}
		if c.Input != "" {
			in := json.RawMessage(c.Input)
			a.Input = &in
		}
		return client.SessionResponseInput{Approval: a}
	default:
		h := &client.HoldResponseInput{Decision: client.HoldDecisionRetry, Note: ptr(c.Note)}
		if c.Skip {
			h.Decision = client.HoldDecisionSkip
		}
		return client.SessionResponseInput{Hold: h}
	}
}

// Run sends the answer; it prints the COMMAND input that carries it.
func (c *RespondCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.RespondToSession(ctx, env.Client, c.Action, c.Session, c.Interrupt, c.response())
	if err != nil {
		return err
	}
	in := r.Actions.RespondToSession
	if in == nil {
		return notFound("session %q of action %s", c.Session, c.Action)
	}
	return env.emit(in, func(w io.Writer) error {
		if in.Status != client.InputStatusPending {
			// The same answer again returns the first one's input (P5):
			// nothing new happens.
			_, err := fmt.Fprintf(w, "%s was answered so already: input %s (%s, %s, sequence %d); nothing new is sent\n",
				c.Interrupt, in.Identity, in.Kind, in.Status, in.Sequence)
			return err
		}
		_, err := fmt.Fprintf(w, "answered %s: input %s (%s, %s, sequence %d); a turn of its own takes it\n",
			c.Interrupt, in.Identity, in.Kind, in.Status, in.Sequence)
		return err
	})
}
