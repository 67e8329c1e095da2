package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/actionsledger/actionsledger/client"
)

// ExecutionsCmd groups the commands on the executions of actions without a
// session block (issue 15): one per event their triggers matched.
type ExecutionsCmd struct {
	List   ExecutionsListCmd   `cmd:"" help:"List an action's executions (an action without a session block), newest event first."`
	Retry  ExecutionsRetryCmd  `cmd:"" help:"Run a FAILED execution again, with its event, at its version (needs RESPOND on the action)."`
	Replay ExecutionsReplayCmd `cmd:"" help:"Run a turn's or an execution's handler again on what it received, committing nothing, and show how the outcome differs (needs WRITE on the action)."`
}

// executionStatuses are the values --status takes.
var executionStatuses = func() []string {
	out := make([]string, len(client.AllExecutionStatus))
	for i, s := range client.AllExecutionStatus {
		out[i] = string(s)
	}
	return out
}()

// ExecutionsListCmd is `executions list ACTION [--status S] [--limit N]`.
type ExecutionsListCmd struct {
	Action string `arg:"" help:"The action's id."`
	Status string `placeholder:"STATUS" help:"Only executions in this status: QUEUED, RUNNING, SUCCEEDED or FAILED."`
	Limit  int    `default:"100" help:"Most executions to list; 0 lists them all."`
}

// Validate checks --status and --limit.
func (c *ExecutionsListCmd) Validate() error {
	if c.Status != "" && !slices.Contains(executionStatuses, upper(c.Status)) {
		return fmt.Errorf("--status %q: one of %s", c.Status, strings.Join(executionStatuses, ", "))
	}
	if c.Limit < 0 {
		return fmt.Errorf("--limit must be 0 or more")
	}
	return nil
}

// Run pages through the executions; JSON output is an array.
func (c *ExecutionsListCmd) Run(ctx context.Context, env *Env) error {
	var status *client.ExecutionStatus
	if c.Status != "" {
		s := client.ExecutionStatus(upper(c.Status))
		status = &s
	}
	all := []client.ExecutionSummary{}
	var after *string
	more := false
	for {
		r, err := client.ListExecutions(ctx, env.Client, c.Action, pageSize(c.Limit, len(all)), after, status)
		if err != nil {
			return err
		}
		a := r.Actions.Action
		if a == nil {
			return notFound("action %s", c.Action)
		}
		all = append(all, a.Executions.Nodes...)
		more = a.Executions.PageInfo.HasNextPage
		if !more || (c.Limit > 0 && len(all) >= c.Limit) {
			break
		}
		after = a.Executions.PageInfo.EndCursor
	}
	return env.emit(all, func(w io.Writer) error {
		t := newTable(w, "ID", "STATUS", "ATTEMPTS", "EVENT", "TRIGGERS", "KEY", "FINISHED", "OUTPUT OR ERROR")
		for _, x := range all {
			ev := ""
			if x.Event != nil {
				ev = x.Event.EventType + " @" + x.Event.Position
			}
			names := make([]string, len(x.Triggers))
			for i, tr := range x.Triggers {
				names[i] = tr.Name
			}
			what := compact(rawPtr(x.Invocation.Output))
			if x.Error != nil {
				what = oneLine(*x.Error)
			}
			attempts := strconv.Itoa(x.Attempts)
			if x.Retries > 0 {
				attempts += fmt.Sprintf(" (%d retries)", x.Retries)
			}
			t.row(x.Id, string(x.Status), attempts, ev, strings.Join(names, ","), clip(str(x.ConcurrencyKey), 30),
				stampPtr(x.FinishedAt), clip(what, 80))
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

// ExecutionsRetryCmd is `executions retry ACTION ID`.
type ExecutionsRetryCmd struct {
	Action string `arg:"" help:"The action's id."`
	ID     string `arg:"" help:"The execution's id (executions list shows it)."`
}

// Run queues the execution again; JSON output is the execution as the
// mutation returns it.
func (c *ExecutionsRetryCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.RetryExecution(ctx, env.Client, c.Action, c.ID)
	if err != nil {
		return err
	}
	x := r.Actions.RetryExecution
	if x == nil {
		return notFound("execution %s of action %s", c.ID, c.Action)
	}
	return env.emit(x, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "execution %s: %s (retry %d, by %s)\n", x.Id, x.Status, x.Retries, str(x.RetriedBy))
		return err
	})
}

// ExecutionsReplayCmd is `executions replay ACTION ID` (T9).
type ExecutionsReplayCmd struct {
	Action   string `arg:"" help:"The action's id."`
	ID       string `arg:"" help:"The execution's id: a turn's (sessions show it) or one of an action without a session block."`
	Recorded bool   `help:"Answer an agent's model calls with the replies the original recorded, instead of calling the model."`
}

// Run replays the execution; JSON output is the replay as the mutation
// returns it.
func (c *ExecutionsReplayCmd) Run(ctx context.Context, env *Env) error {
	p := client.ReplayProviderLive
	if c.Recorded {
		p = client.ReplayProviderRecorded
	}
	r, err := client.ReplayExecution(ctx, env.Client, c.Action, c.ID, &p)
	if err != nil {
		return err
	}
	x := r.Actions.ReplayExecution
	if x == nil {
		return notFound("execution %s of action %s", c.ID, c.Action)
	}
	return env.emit(x, func(w io.Writer) error {
		fmt.Fprintf(w, "replay %s of %s: %s", x.Id, x.Replay.Of.Id, x.Status)
		if x.Error != nil {
			fmt.Fprintf(w, " (%s)", *x.Error)
		}
		fmt.Fprintln(w)
		if len(x.Replay.Diff) == 0 {
			_, err := fmt.Fprintln(w, "the same outcome as the original")
			return err
		}
		t := newTable(w, "CHANGE", "PATH", "ORIGINAL", "REPLAY")
		for _, d := range x.Replay.Diff {
			t.row(d.Op, d.Path, compactJSON(d.Original), compactJSON(d.Replay))
		}
		return t.flush()
	})
}

// compactJSON is a JSON value on one line, "-" for none.
func compactJSON(v *json.RawMessage) string {
	if v == nil || len(*v) == 0 || string(*v) == "null" {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, *v) != nil {
		return string(*v)
	}
	return b.String()
}
