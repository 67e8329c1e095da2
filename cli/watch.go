package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/actionsledger/actionsledger/client"
)

// SessionsWatchCmd is `sessions watch ACTION ID`: it follows the
// sessionUpdates subscription (issue 12) and prints each update.
type SessionsWatchCmd struct {
	Action     string `arg:"" help:"The action's id."`
	ID         string `arg:"" help:"The session's id."`
	UntilFinal bool   `help:"Keep following while the session waits on an approval or a held turn; stop only when it is COMPLETED, FAILED or CANCELLED."`
}

// Run prints updates until the session is final, or (without
// --until-final) until it waits on an interrupt; both exit 0, as does
// stopping it with Ctrl-C. After a broken connection it subscribes again,
// and the first update is the session as it then is.
func (c *SessionsWatchCmd) Run(ctx context.Context, env *Env) error {
	open := func(ctx context.Context) (*client.Stream[*client.SessionUpdate], error) {
		return env.Client.FollowSessionUpdates(ctx, c.Action, c.ID)
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
