package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/actionsledger/actionsledger/client"
)

// SessionsWatchCmd is `sessions watch ACTION ID`: it follows the
// sessionUpdates subscription (issue 12) and prints each update.
type SessionsWatchCmd struct {
	Action     string        `arg:"" help:"The action's id."`
	ID         string        `arg:"" help:"The session's id."`
	UntilFinal bool          `help:"Keep following while the session waits on an approval or a held turn; stop only when it is COMPLETED, FAILED or CANCELLED."`
	Wait       time.Duration `default:"10s" placeholder:"DURATION" help:"How long to wait for a session that does not exist yet (the event that starts it was just written, and the dispatcher has not run it yet); 0: fail at once."`
}

// Run prints updates until the session is final, or (without
// --until-final) until it waits on an interrupt; both exit 0, as does
// stopping it with Ctrl-C. A session that does not exist yet is waited for
// (--wait), saying so on standard error; after the wait, or at once for an
// action that does not exist, it exits 4 (not found). After a broken
// connection it subscribes again, and the first update is the session as
// it then is.
func (c *SessionsWatchCmd) Run(ctx context.Context, env *Env) error {
	if c.Wait < 0 {
		return usagef("--wait must be 0 or more")
	}
	opened := false
	open := func(ctx context.Context) (updates[*client.SessionUpdate], error) {
		if !opened {
			opened = true
			return c.await(ctx, env)
		}
		s, err := env.Client.FollowSessionUpdates(ctx, c.Action, c.ID)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return followLoop(ctx, env.Stderr, open, func(u *client.SessionUpdate) (bool, error) {
		if env.JSON {
			if err := writeJSON(env.Stdout, u, false); err != nil {
				return true, err
			}
		} else {
			printUpdate(env.Stdout, c.Action, u)
		}
		if u.Kind != client.SessionUpdateKindSession {
			return false, nil
		}
		s := &u.Session
		waits := len(s.Approvals)+len(s.Holds) > 0
		return final(s.Status) || (waits && !c.UntilFinal && !s.Running), nil
	})
}

// Waiting for a session: the first retry after firstPoll, then each wait
// twice the last, up to maxPoll.
var (
	firstPoll = 100 * time.Millisecond
	maxPoll   = time.Second
)

// await subscribes and reads the first update; while the server answers
// NOT_FOUND for the session (and the action exists), it subscribes again
// until --wait has passed.
func (c *SessionsWatchCmd) await(ctx context.Context, env *Env) (updates[*client.SessionUpdate], error) {
	deadline := time.Now().Add(c.Wait)
	delay := firstPoll
	waiting := false
	for {
		s, err := env.Client.FollowSessionUpdates(ctx, c.Action, c.ID)
		if err != nil {
			return nil, err
		}
		u, err := s.Next(ctx)
		if err == nil {
			return &peeked[*client.SessionUpdate]{updates: s, first: u}, nil
		}
		_ = s.Close()
		if c.Wait == 0 || ExitCode(err) != ExitNotFound {
			return nil, err
		}
		if !waiting {
			// Waiting is for a session, not for an action that is not there.
			r, aerr := client.GetAction(ctx, env.Client, c.Action)
			switch {
			case aerr != nil:
				return nil, aerr
			case r.Actions.Action == nil:
				return nil, notFound("action %s", c.Action)
			}
			waiting = true
			fmt.Fprintf(env.Stderr, "actionsledger: action %s has no session %s yet; waiting up to %s for it (--wait)\n", c.Action, c.ID, c.Wait)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, notFound("session %s of action %s after waiting %s", c.ID, c.Action, c.Wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(delay, left)):
		}
		delay = min(2*delay, maxPoll)
	}
}

// printUpdate writes one update as a line (with the interrupts waited on).
func printUpdate(w io.Writer, actionID string, u *client.SessionUpdate) {
	if u.Kind == client.SessionUpdateKindTranscript && u.TranscriptEntry != nil {
		e := u.TranscriptEntry
		turn := ""
		if u.TurnNumber != nil {
			turn = fmt.Sprintf("turn %d ", *u.TurnNumber)
		}
		fmt.Fprintf(w, "%s  %sentry %d %s %s\n", stamp(e.At), turn, e.Sequence, e.Kind, clip(compact(e.Data), 200))
		return
	}
	s := &u.Session
	line := fmt.Sprintf("%s  session %s %s", stamp(s.UpdatedAt), s.Id, s.Status)
	if s.Running {
		line += " running"
	}
	if t := u.Turn; t != nil {
		line += fmt.Sprintf(", turn %d %s", t.Number, t.Status)
	}
	line += fmt.Sprintf(", %d pending", u.PendingInputs)
	if s.Reason != nil {
		line += ": " + clip(oneLine(*s.Reason), 120)
	}
	fmt.Fprintln(w, line)
	if st := compact(rawPtr(s.State)); st != "" {
		fmt.Fprintf(w, "  state: %s\n", clip(st, 200))
	}
	printInterrupts(w, actionID, s.Id, &s.PendingInterrupts)
}
