package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/actionsledger/actionsledger/client"
)

// SessionsCmd groups the session commands (issue 12, CLI).
type SessionsCmd struct {
	List      SessionsListCmd    `cmd:"" help:"List an action's sessions, newest first."`
	Get       SessionsGetCmd     `cmd:"" help:"Show a session: status, state, what it waits on, pending inputs, and its turns with inputs and transcripts."`
	Watch     SessionsWatchCmd   `cmd:"" help:"Follow a session live until it ends or waits on an approval or a held turn."`
	Close     SessionsCloseCmd   `cmd:"" help:"End a session (status CANCELLED) with a reason."`
	Resume    SessionsResumeCmd  `cmd:"" help:"Wake a session that waits after a failed turn, or is parked: its pending inputs get a turn at once."`
	Send      SessionsSendCmd    `cmd:"" help:"Send a session a message (taken by its next turn) or a control (--interrupt ends the running turn early)."`
	Input     SessionsInputCmd   `cmd:"" help:"Edit, delete or promote a pending message."`
	Retry     SessionsRetryCmd   `cmd:"" help:"Retry a FAILED session as a new one (its successor), with its pending inputs."`
	Archive   SessionsArchiveCmd `cmd:"" help:"Hide a session from lists (nothing else changes; a new input shows it again)."`
	Unarchive SessionsArchiveCmd `cmd:"" help:"Show an archived session in lists again."`
	Start     SessionsStartCmd   `cmd:"" help:"Start a session by hand with a session input, as a start trigger would (a singleton's held slot is refused)."`
	Budget    SessionsBudgetCmd  `cmd:"" help:"Set a live session's spend cap in US dollars (--max, or --no-cap); --retry runs a turn held for its budget again."`
}

// sessionStatuses are SessionStatus's values, for --status.
var sessionStatuses = []string{"OPEN", "WAITING", "COMPLETED", "FAILED", "CANCELLED"}

// final reports whether a session in status s takes no more inputs.
func final(s client.SessionStatus) bool {
	return s == client.SessionStatusCompleted || s == client.SessionStatusFailed || s == client.SessionStatusCancelled
}

// SessionsListCmd is `sessions list ACTION [--status S]`.
type SessionsListCmd struct {
	Action   string `arg:"" help:"The action's id."`
	Status   string `placeholder:"STATUS" help:"Only sessions in this status: OPEN, WAITING, COMPLETED, FAILED or CANCELLED."`
	Limit    int    `default:"100" help:"Most sessions to list; 0 lists them all."`
	Archived bool   `help:"List only archived sessions (hidden otherwise)."`
}

// Validate checks --status and --limit.
func (c *SessionsListCmd) Validate() error {
	if c.Status != "" && !slices.Contains(sessionStatuses, upper(c.Status)) {
		return fmt.Errorf("--status %q: one of %s", c.Status, strings.Join(sessionStatuses, ", "))
	}
	if c.Limit < 0 {
		return fmt.Errorf("--limit must be 0 or more")
	}
	return nil
}

// Run pages through the sessions; JSON output is an array.
func (c *SessionsListCmd) Run(ctx context.Context, env *Env) error {
	var status *client.SessionStatus
	if c.Status != "" {
		s := client.SessionStatus(upper(c.Status))
		status = &s
	}
	var all []client.SessionSummary
	var after *string
	more := false
	for {
		archived := c.Archived
		r, err := client.ListSessions(ctx, env.Client, c.Action, pageSize(c.Limit, len(all)), after, status, &archived)
		if err != nil {
			return err
		}
		a := r.Actions.Action
		if a == nil {
			return notFound("action %s", c.Action)
		}
		all = append(all, a.Sessions.Nodes...)
		more = a.Sessions.PageInfo.HasNextPage
		if !more || (c.Limit > 0 && len(all) >= c.Limit) {
			break
		}
		after = a.Sessions.PageInfo.EndCursor
	}
	if all == nil {
		all = []client.SessionSummary{}
	}
	return env.emit(all, func(w io.Writer) error {
		t := newTable(w, "ID", "STATUS", "VERSION", "RUNNING", "STARTED", "UPDATED", "TITLE", "REASON / STATUS LINE")
		for _, s := range all {
			running := ""
			if s.Running {
				running = "yes"
			}
			line := str(s.Reason)
			if line == "" {
				line = str(s.AmbientStatus)
			}
			t.row(s.Id, string(s.Status), strconv.Itoa(s.Version), running, stamp(s.StartedAt), stamp(s.UpdatedAt), clip(str(s.DisplayTitle), 40), clip(line, 60))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if more {
			fmt.Fprintf(env.Stderr, "(first %d; --limit 0 lists all)\n", len(all))
		}
		return nil
	})
}

// SessionsGetCmd is `sessions get ACTION ID`.
type SessionsGetCmd struct {
	Action  string `arg:"" help:"The action's id."`
	ID      string `arg:"" help:"The session's id."`
	Turns   int    `default:"20" help:"Newest turns to show (1-500)."`
	Entries int    `default:"100" help:"Transcript entries to show per turn (1-500)."`
}

// Validate checks the page sizes.
func (c *SessionsGetCmd) Validate() error {
	if c.Turns < 1 || c.Turns > 500 || c.Entries < 1 || c.Entries > 500 {
		return fmt.Errorf("--turns and --entries: 1 to 500")
	}
	return nil
}

// Run shows the session; JSON output is the session as the API gives it.
func (c *SessionsGetCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.GetSession(ctx, env.Client, c.Action, c.ID, &c.Turns, &c.Entries)
	if err != nil {
		return err
	}
	if r.Actions.Action == nil {
		return notFound("action %s", c.Action)
	}
	s := r.Actions.Action.Session
	if s == nil {
		return notFound("session %q of action %s", c.ID, c.Action)
	}
	return env.emit(s, func(w io.Writer) error { return printSession(w, c.Action, s) })
}

func printSession(w io.Writer, actionID string, s *client.SessionDetail) error {
	fmt.Fprintf(w, "session:  %s\nstatus:   %s\n", s.Id, s.Status)
	if s.Reason != nil {
		fmt.Fprintf(w, "reason:   %s\n", oneLine(*s.Reason))
	}
	fmt.Fprintf(w, "version:  %d\nrunning:  %t\nstarted:  %s\n", s.Version, s.Running, stamp(s.StartedAt))
	if s.EndsAt != nil {
		fmt.Fprintf(w, "ends:     %s\n", stamp(*s.EndsAt))
	}
	fmt.Fprintf(w, "updated:  %s\ninput:    %s\nstate:    %s\n", stamp(s.UpdatedAt), compact(s.Input), compact(rawPtr(s.State)))
	if u := s.Usage; u.ModelCalls > 0 || s.Budget.MaxUsd != nil {
		limit := "no cap"
		if s.Budget.MaxUsd != nil {
			limit = fmt.Sprintf("cap $%.2f", *s.Budget.MaxUsd)
			if s.Budget.Exhausted {
				limit += ", reached"
			}
		}
		fmt.Fprintf(w, "spend:    $%.4f (%s); %d model calls, %d input and %d output tokens\n", s.Budget.SpentUsd, limit,
			u.ModelCalls, u.InputTokens, u.OutputTokens)
	}
	printInterrupts(w, actionID, s.Id, &s.PendingInterrupts)
	if n := s.Inputs.Nodes; len(n) > 0 {
		fmt.Fprintf(w, "pending inputs (%d):\n", len(n))
		t := newTable(w, "  SEQ", "KIND", "IDENTITY", "EVENT", "DELIVERED")
		for _, in := range n {
			ev := ""
			if in.Event != nil {
				ev = in.Event.EventType + " @" + in.Event.Position
			}
			t.row("  "+strconv.Itoa(in.Sequence), string(in.Kind), in.Identity, ev, stamp(in.DeliveredAt))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	for _, tu := range s.Turns.Nodes {
		printTurn(w, &tu)
	}
	return nil
}

// printInterrupts lists what a session waits on, with the command that
// answers each.
func printInterrupts(w io.Writer, actionID, sessionID string, p *client.PendingInterrupts) {
	for _, a := range p.Approvals {
		fmt.Fprintf(w, "waits on approval %s: %s v%d %s\n  answer: actionsledger respond %s %s %s --approve|--deny\n",
			a.InterruptId, a.Tool, a.ToolVersion, clip(compact(a.Input), 200), actionID, sessionID, a.InterruptId)
	}
	for _, h := range p.Holds {
		why := string(h.Cause)
		if h.Category != nil {
			why += " (" + *h.Category + ")"
		}
		if h.Explanation != nil {
			why += ": " + clip(oneLine(*h.Explanation), 200)
		}
		fmt.Fprintf(w, "waits on held turn %d, %s: %s\n  answer: actionsledger respond %s %s %s --retry|--skip\n",
			h.Turn, h.InterruptId, why, actionID, sessionID, h.InterruptId)
	}
}

func printTurn(w io.Writer, tu *client.Turn) {
	finished := stampPtr(tu.FinishedAt)
	if finished == "" {
		finished = "…"
	}
	fin := ""
	if tu.Final {
		fin = " (final)"
	}
	fmt.Fprintf(w, "turn %d: %s%s, %s to %s, execution %s %s\n", tu.Number, tu.Status, fin, stamp(tu.StartedAt), finished,
		tu.Execution.Id, tu.Execution.Status)
	for _, in := range tu.Inputs {
		line := fmt.Sprintf("  input %d %s %s", in.Sequence, in.Kind, in.Identity)
		if ev := in.Event; ev != nil {
			line += " " + ev.EventType
			if ev.Record != nil {
				if kv, ok := (*ev.Record).(*client.TurnInputsActionSessionInputEventRecordKVValue); ok {
					line += fmt.Sprintf(" %s/%s = %s", kv.Namespace, kv.Key, clip(compact(kv.Value), 120))
				}
			} else {
				line += " " + clip(compact(ev.Data), 120)
			}
		}
		fmt.Fprintln(w, oneLine(line))
	}
	if cp := tu.Checkpoint; cp != nil {
		fmt.Fprintf(w, "  checkpoint: %s %s", cp.Status, clip(compact(rawPtr(cp.State)), 200))
		if cp.Reason != nil {
			fmt.Fprintf(w, " (%s)", clip(oneLine(*cp.Reason), 120))
		}
		fmt.Fprintln(w)
	}
	ex := &tu.Execution
	if ex.Error != nil {
		fmt.Fprintf(w, "  error: %s\n", clip(oneLine(*ex.Error), 300))
	}
	if out := compact(rawPtr(ex.Invocation.Output)); out != "" {
		fmt.Fprintf(w, "  output: %s\n", clip(out, 300))
	}
	for _, e := range ex.Invocation.Transcript.Nodes {
		fmt.Fprintf(w, "  transcript %d %s %s\n", e.Sequence, e.Kind, clip(compact(e.Data), 200))
	}
	for _, ch := range ex.Children.Nodes {
		fmt.Fprintf(w, "  call %s %s %s\n", ch.Action.Definition.Name, ch.Id, ch.Status)
	}
}

// SessionsCloseCmd is `sessions close ACTION ID --reason R [--handoff NOTE] [--successor]`.
type SessionsCloseCmd struct {
	Action    string `arg:"" help:"The action's id."`
	ID        string `arg:"" help:"The session's id."`
	Reason    string `required:"" help:"Why; kept as the session's reason."`
	Handoff   string `help:"A note (at most 20,000 characters) kept on the session and given to its successor."`
	Successor bool   `help:"Start a successor with the same input (id <id>~<n>), the handoff note its first input."`
}

// Run closes the session (I3, G5).
func (c *SessionsCloseCmd) Run(ctx context.Context, env *Env) error {
	if c.Handoff != "" || c.Successor {
		var note *string
		if c.Handoff != "" {
			note = &c.Handoff
		}
		r, err := client.HandOffSession(ctx, env.Client, c.Action, c.ID, c.Reason, note, &c.Successor)
		if err != nil {
			return err
		}
		s := r.Actions.CloseSession
		if s == nil {
			return notFound("session %q of action %s", c.ID, c.Action)
		}
		return env.emit(s, func(w io.Writer) error {
			if s.Successor != nil {
				_, err := fmt.Fprintf(w, "session %s: %s; successor %s: %s\n", s.Id, s.Status, s.Successor.Id, s.Successor.Status)
				return err
			}
			_, err := fmt.Fprintf(w, "session %s: %s\n", s.Id, s.Status)
			return err
		})
	}
	r, err := client.CloseSession(ctx, env.Client, c.Action, c.ID, c.Reason)
	if err != nil {
		return err
	}
	s := r.Actions.CloseSession
	if s == nil {
		return notFound("session %q of action %s", c.ID, c.Action)
	}
	return env.emit(s, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "session %s: %s (%s)\n", s.Id, s.Status, oneLine(str(s.Reason)))
		return err
	})
}

// SessionsResumeCmd is `sessions resume ACTION ID` (G4, G10).
type SessionsResumeCmd struct {
	Action string `arg:"" help:"The action's id."`
	ID     string `arg:"" help:"The session's id."`
}

// Run resumes the session.
func (c *SessionsResumeCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.ResumeSession(ctx, env.Client, c.Action, c.ID)
	if err != nil {
		return err
	}
	s := r.Actions.ResumeSession
	if s == nil {
		return notFound("session %q of action %s", c.ID, c.Action)
	}
	return env.emit(s, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "session %s: %s\n", s.Id, s.Status)
		return err
	})
}

// SessionsSendCmd is `sessions send ACTION ID (--message M | --interrupt | --resume) --key K` (G1, G9).
type SessionsSendCmd struct {
	Action    string `arg:"" help:"The action's id."`
	ID        string `arg:"" help:"The session's id."`
	Message   string `short:"m" xor:"what" help:"The message's text (at most 20,000 bytes)."`
	Interrupt bool   `xor:"what" help:"End the running turn early."`
	Resume    bool   `xor:"what" help:"Wake a session that waits after a failed turn, or is parked."`
	Key       string `required:"" help:"Idempotency key: sending again with it returns the first input."`
}

// Validate needs exactly one of --message, --interrupt and --resume.
func (c *SessionsSendCmd) Validate() error {
	if c.Message == "" && !c.Interrupt && !c.Resume {
		return fmt.Errorf("give --message, --interrupt or --resume")
	}
	return nil
}

// Run sends it and prints the COMMAND input it became.
func (c *SessionsSendCmd) Run(ctx context.Context, env *Env) error {
	var msg *string
	var control *client.SessionControl
	switch {
	case c.Interrupt:
		k := client.SessionControlInterrupt
		control = &k
	case c.Resume:
		k := client.SessionControlResume
		control = &k
	default:
		msg = &c.Message
	}
	r, err := client.SendToSession(ctx, env.Client, c.Action, c.ID, msg, control, c.Key)
	if err != nil {
		return err
	}
	in := r.Actions.SendToSession
	if in == nil {
		return notFound("session %q of action %s", c.ID, c.Action)
	}
	return env.emit(in, func(w io.Writer) error {
		status := ""
		if in.Command != nil {
			status = string(in.Command.Status)
		}
		_, err := fmt.Fprintf(w, "input %d: %s\n", in.Sequence, status)
		return err
	})
}

// SessionsInputCmd is `sessions input (edit|delete|promote) ACTION ID SEQUENCE` (G2).
type SessionsInputCmd struct {
	Edit    SessionsInputEditCmd    `cmd:"" help:"Replace a pending message's text."`
	Delete  SessionsInputDeleteCmd  `cmd:"" help:"Delete a pending message: no turn takes it."`
	Promote SessionsInputPromoteCmd `cmd:"" help:"Run a pending message next, before the other pending messages."`
}

// SessionsInputChangeCmd addresses one pending message.
type SessionsInputChangeCmd struct {
	Action   string `arg:"" help:"The action's id."`
	ID       string `arg:"" help:"The session's id."`
	Sequence int    `arg:"" help:"The message's input sequence."`
}

// SessionsInputEditCmd is `sessions input edit ACTION ID SEQUENCE --message M`.
type SessionsInputEditCmd struct {
	SessionsInputChangeCmd
	Message string `short:"m" required:"" help:"The new text."`
}

// Run edits the message.
func (c *SessionsInputEditCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.EditSessionInput(ctx, env.Client, c.Action, c.ID, c.Sequence, c.Message)
	if err != nil {
		return err
	}
	return emitChanged(env, r.Actions.EditSessionInput, "edited")
}

// SessionsInputDeleteCmd is `sessions input delete ACTION ID SEQUENCE`.
type SessionsInputDeleteCmd struct{ SessionsInputChangeCmd }

// Run deletes the message.
func (c *SessionsInputDeleteCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.DeleteSessionInput(ctx, env.Client, c.Action, c.ID, c.Sequence)
	if err != nil {
		return err
	}
	return emitChanged(env, r.Actions.DeleteSessionInput, "deleted")
}

// SessionsInputPromoteCmd is `sessions input promote ACTION ID SEQUENCE`.
type SessionsInputPromoteCmd struct{ SessionsInputChangeCmd }

// Run promotes the message.
func (c *SessionsInputPromoteCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.PromoteSessionInput(ctx, env.Client, c.Action, c.ID, c.Sequence)
	if err != nil {
		return err
	}
	return emitChanged(env, r.Actions.PromoteSessionInput, "promoted")
}

func emitChanged[T any](env *Env, in *T, what string) error {
	if in == nil {
		return notFound("the session")
	}
	return env.emit(in, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s\n", what)
		return err
	})
}

// SessionsRetryCmd is `sessions retry ACTION ID` (G5).
type SessionsRetryCmd struct {
	Action string `arg:"" help:"The action's id."`
	ID     string `arg:"" help:"The FAILED session's id."`
}

// Run retries the session and prints its successor.
func (c *SessionsRetryCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.RetrySession(ctx, env.Client, c.Action, c.ID)
	if err != nil {
		return err
	}
	s := r.Actions.RetrySession
	if s == nil {
		return notFound("session %q of action %s", c.ID, c.Action)
	}
	return env.emit(s, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "session %s: %s (retries %s)\n", s.Id, s.Status, c.ID)
		return err
	})
}

// SessionsArchiveCmd is `sessions archive|unarchive ACTION ID` (G6).
type SessionsArchiveCmd struct {
	Action string `arg:"" help:"The action's id."`
	ID     string `arg:"" help:"The session's id."`
}

// Run archives the session, or shows it again for `sessions unarchive`.
func (c *SessionsArchiveCmd) Run(ctx context.Context, env *Env, kctx *kong.Context) error {
	var archivedAt *time.Time
	var found bool
	if strings.HasPrefix(kctx.Selected().Name, "unarchive") {
		r, err := client.UnarchiveSession(ctx, env.Client, c.Action, c.ID)
		if err != nil {
			return err
		}
		if s := r.Actions.UnarchiveSession; s != nil {
			archivedAt, found = s.ArchivedAt, true
		}
	} else {
		r, err := client.ArchiveSession(ctx, env.Client, c.Action, c.ID)
		if err != nil {
			return err
		}
		if s := r.Actions.ArchiveSession; s != nil {
			archivedAt, found = s.ArchivedAt, true
		}
	}
	if !found {
		return notFound("session %q of action %s", c.ID, c.Action)
	}
	out := map[string]any{"id": c.ID, "archivedAt": archivedAt}
	return env.emit(out, func(w io.Writer) error {
		if archivedAt == nil {
			_, err := fmt.Fprintf(w, "session %s: shown in lists\n", c.ID)
			return err
		}
		_, err := fmt.Fprintf(w, "session %s: archived\n", c.ID)
		return err
	})
}

// SessionsBudgetCmd is `sessions budget ACTION ID --max USD|--no-cap
// [--retry]` (G8).
type SessionsBudgetCmd struct {
	Action string   `arg:"" help:"The action's id."`
	ID     string   `arg:"" help:"The session's id."`
	Max    *float64 `help:"The new cap in US dollars (above 0)." xor:"cap" required:""`
	NoCap  bool     `name:"no-cap" help:"Remove the cap." xor:"cap" required:""`
	Retry  bool     `help:"Then answer the session's pending BUDGET holds with RETRY."`
}

// Run sets the cap and, with --retry, retries the turns held for it.
func (c *SessionsBudgetCmd) Run(ctx context.Context, env *Env) error {
	var maxUSD *float64
	if !c.NoCap {
		if c.Max == nil {
			return errors.New("give --max USD or --no-cap")
		}
		if m := *c.Max; math.IsNaN(m) || math.IsInf(m, 0) || m <= 0 {
			return fmt.Errorf("--max %v: a number of US dollars above 0, e.g. --max 2.50", m)
		}
		maxUSD = c.Max
	}
	r, err := client.SetSessionBudget(ctx, env.Client, c.Action, c.ID, maxUSD)
	if err != nil {
		return err
	}
	s := r.Actions.SetSessionBudget
	if s == nil {
		return notFound("session %q of action %s", c.ID, c.Action)
	}
	var retried []string
	if c.Retry {
		for _, h := range s.Holds {
			if h.Cause != client.HoldCauseBudget || h.Status != client.InterruptStatusPending {
				continue
			}
			resp := client.SessionResponseInput{Hold: &client.HoldResponseInput{Decision: client.HoldDecisionRetry}}
			if _, err := client.RespondToSession(ctx, env.Client, c.Action, c.ID, h.InterruptId, resp); err != nil {
				return err
			}
			retried = append(retried, h.InterruptId)
		}
	}
	out := map[string]any{"id": s.Id, "status": s.Status, "budget": s.Budget, "retried": retried}
	return env.emit(out, func(w io.Writer) error {
		limit := "no cap"
		if b := s.Budget; b.MaxUsd != nil {
			limit = fmt.Sprintf("cap $%.2f, $%.4f left", *b.MaxUsd, *b.RemainingUsd)
		}
		fmt.Fprintf(w, "session %s: %s; spent $%.4f (%s)\n", s.Id, s.Status, s.Budget.SpentUsd, limit)
		for _, id := range retried {
			fmt.Fprintf(w, "retried held turn (interrupt %s)\n", id)
		}
		return nil
	})
}

// SessionsStartCmd is `sessions start ACTION INPUT` (G7).
type SessionsStartCmd struct {
	Action string `arg:"" help:"The action's id."`
	Input  string `arg:"" name:"json" help:"The session input as JSON, e.g. '{\"account_id\": \"3f0c9f8e\"}'; - reads standard input."`
}

// Run starts the session and prints it.
func (c *SessionsStartCmd) Run(ctx context.Context, env *Env) error {
	input, err := jsonArg("JSON", c.Input, env.Stdin)
	if err != nil {
		return err
	}
	r, err := client.StartSession(ctx, env.Client, c.Action, input)
	if err != nil {
		return err
	}
	st := r.Actions.StartSession
	if st == nil {
		return notFound("action %s", c.Action)
	}
	return env.emit(st, func(w io.Writer) error {
		what := "started"
		if !st.Created {
			what = "was live already"
		}
		_, err := fmt.Fprintf(w, "session %s: %s (%s)\n", st.Session.Id, st.Session.Status, what)
		return err
	})
}
