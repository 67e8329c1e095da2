package cli

import (
	"context"
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
	List  ExecutionsListCmd  `cmd:"" help:"List an action's executions (an action without a session block), newest event first."`
	Retry ExecutionsRetryCmd `cmd:"" help:"Run a FAILED execution again, with its event, at its version (needs RESPOND on the action)."`
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
