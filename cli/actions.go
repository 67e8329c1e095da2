package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/actionsledger/actionsledger/client"
)

// ActionsCmd groups `actions list` and `actions get` (issue 12, CLI).
type ActionsCmd struct {
	List ActionsListCmd `cmd:"" help:"List actions by id."`
	Get  ActionsGetCmd  `cmd:"" help:"Show an action: status, definition and versions."`
	// Issue 15.
	DryRun ActionsDryRunCmd `cmd:"" name:"dry-run" help:"Show what a definition would have done over past events (sessions, intake records, per trigger), storing nothing (needs WRITE on the action)."`
}

// ActionsListCmd is `actions list`.
type ActionsListCmd struct {
	Limit int `default:"100" help:"Most actions to list; 0 lists them all."`
}

// pageSize is how many items one request asks for, within the API's 1-500.
func pageSize(limit, got int) *int {
	n := 500
	if limit > 0 && limit-got < n {
		n = limit - got
	}
	return &n
}

// Run pages through the actions; JSON output is an array of them.
func (c *ActionsListCmd) Run(ctx context.Context, env *Env) error {
	if c.Limit < 0 {
		return usagef("--limit must be 0 or more")
	}
	var all []client.ActionSummary
	var after *string
	more := false
	for {
		r, err := client.ListActions(ctx, env.Client, pageSize(c.Limit, len(all)), after)
		if err != nil {
			return err
		}
		page := r.Actions.Actions
		all = append(all, page.Nodes...)
		more = page.PageInfo.HasNextPage
		if !more || (c.Limit > 0 && len(all) >= c.Limit) {
			break
		}
		after = page.PageInfo.EndCursor
	}
	if all == nil {
		all = []client.ActionSummary{}
	}
	return env.emit(all, func(w io.Writer) error {
		t := newTable(w, "ID", "NAME", "KIND", "VERSION", "STATUS", "UPDATED")
		for _, a := range all {
			t.row(a.Id, a.Definition.Name, a.Definition.Kind, strconv.Itoa(a.Version), string(a.Status), stamp(a.UpdatedAt))
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

// ActionsGetCmd is `actions get ID`.
type ActionsGetCmd struct {
	ID string `arg:"" help:"The action's id (a UUID)."`
}

// Run shows the action; its JSON output's definition has ActionInput's
// shape, so `jq '.definition + {id}'` of it can be applied again.
func (c *ActionsGetCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.GetAction(ctx, env.Client, c.ID)
	if err != nil {
		return err
	}
	a := r.Actions.Action
	if a == nil {
		return notFound("action %s", c.ID)
	}
	return env.emit(a, func(w io.Writer) error {
		d := &a.Definition.DefinitionFields
		fmt.Fprintf(w, "id:       %s\nname:     %s\nkind:     %s\nstatus:   %s\nversion:  %d\ncreated:  %s\nupdated:  %s\n",
			a.Id, d.Name, d.Kind, a.Status, a.Version, stamp(a.CreatedAt), stamp(a.UpdatedAt))
		if len(d.Triggers) > 0 {
			fmt.Fprintln(w, "triggers:")
			t := newTable(w, "  NAME", "ROLE", "EVENT")
			for _, tr := range d.Triggers {
				role := ""
				if s := tr.Session; s != nil && s.Start != nil {
					role = "start"
				} else if s != nil && s.Resume != nil {
					role = "resume " + s.Resume.Id
				}
				t.row("  "+tr.Name, role, triggerWhen(tr))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		if len(a.Schedules) > 0 {
			fmt.Fprintln(w, "schedules:")
			t := newTable(w, "  TRIGGER", "NEXT", "LAST FIRED", "FIRED", "MISSED")
			for _, s := range a.Schedules {
				next := "paused"
				if s.Active {
					next = stampPtr(s.DueAt)
				}
				t.row("  "+s.Trigger, next, stampPtr(s.LastFiredAt), strconv.Itoa(s.Fired), strconv.Itoa(s.Missed))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		if err := printIgnored(w, a); err != nil {
			return err
		}
		fmt.Fprintln(w, "versions:")
		backfills := slices.ContainsFunc(a.Versions, func(v client.ActionDetailVersionsActionVersion) bool { return v.Backfill != nil })
		cols := []string{"  VERSION", "CREATED", "AUTHOR", "FROM POSITION"}
		if backfills {
			cols = append(cols, "BACKFILL")
		}
		t := newTable(w, cols...)
		for _, v := range a.Versions {
			row := []string{"  " + strconv.Itoa(v.Version), stamp(v.CreatedAt), str(v.Author), v.FromPosition}
			if b := v.Backfill; b != nil {
				bf := fmt.Sprintf("%s from %s, at %s (%.0f%%)", b.Status, b.From, b.Reached, 100*b.Progress)
				if b.Joined != nil {
					bf = fmt.Sprintf("%s from %s, joined live at %s", b.Status, b.From, *b.Joined)
				}
				row = append(row, bf)
			} else if backfills {
				row = append(row, "")
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
		def, err := marshalIndent(&a.Definition, "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "definition:\n  %s\n", def)
		return err
	})
}

// triggerWhen says what a trigger matches: its predicate, or its schedule
// (A4).
func triggerWhen(tr client.DefinitionFieldsTriggersTrigger) string {
	s := tr.Schedule
	switch {
	case s == nil:
		return str(tr.Event)
	case s.Every != nil:
		return "schedule: every " + *s.Every
	case s.Timezone != nil:
		return "schedule: cron " + str(s.Cron) + " (" + *s.Timezone + ")"
	default:
		return "schedule: cron " + str(s.Cron) + " (UTC)"
	}
}

// ActionsDryRunCmd is `actions dry-run -f FILE --from N` (issue 15).
type ActionsDryRunCmd struct {
	File  string `short:"f" required:"" placeholder:"FILE" help:"The definition, as apply reads it (YAML or JSON with the action's id); - reads standard input."`
	From  string `required:"" placeholder:"POSITION" help:"The first ledger position to judge (1: the whole ledger)."`
	To    string `placeholder:"POSITION" help:"The last position to judge; default: the head."`
	Limit int    `help:"Most events to read, 1-500000; 0 or unset: the server's default (100000)."`
}

// Run dry-runs the definition; JSON output is the dry run as the query
// returns it.
func (c *ActionsDryRunCmd) Run(ctx context.Context, env *Env) error {
	doc, err := (&ApplyCmd{File: c.File}).read(env.Stdin)
	if err != nil {
		return err
	}
	var to *string
	if c.To != "" {
		to = &c.To
	}
	var limit *int
	if c.Limit != 0 {
		limit = &c.Limit
	}
	r, err := client.DryRun(ctx, env.Client, doc.ID, doc.Input, c.From, to, limit)
	if err != nil {
		return err
	}
	d := r.Actions.DryRun
	return env.emit(d, func(w io.Writer) error {
		fmt.Fprintf(w, "positions %s-%s: %d events read in %d ms", d.From, d.To, d.Events, d.TookMs)
		if !d.Complete {
			fmt.Fprintf(w, " (the limit stopped it at %s)", d.Reached)
		}
		fmt.Fprintf(w, "\nsessions started: %d; executions: %d\n", d.SessionCount, d.Executions)
		t := newTable(w, "TRIGGER", "MATCHED", "STARTED", "DELIVERED", "INTAKE", "EXECUTIONS")
		for _, x := range d.Triggers {
			t.row(x.Trigger, strconv.Itoa(x.Matched), strconv.Itoa(x.Started), strconv.Itoa(x.Delivered), strconv.Itoa(x.IntakeRecords), strconv.Itoa(x.Executions))
		}
		if err := t.flush(); err != nil {
			return err
		}
		for _, ic := range d.IntakeCounts {
			fmt.Fprintf(w, "intake records (%s): %d\n", ic.Reason, ic.Count)
		}
		for _, dg := range d.Diagnostics {
			fmt.Fprintf(w, "predicate of %s failed on %d events: %s\n", dg.Trigger, dg.Count, dg.LastMessage)
		}
		return nil
	})
}

// printIgnored prints why events were ignored, when any were: the
// predicates that failed (S4) and the newest intake records (S5).
func printIgnored(w io.Writer, a *client.ActionDetail) error {
	if len(a.TriggerDiagnostics) > 0 {
		fmt.Fprintln(w, "predicate failures (events a trigger's expression failed on):")
		t := newTable(w, "  TRIGGER", "VERSION", "EVENTS", "LAST", "LAST POSITION", "LAST MESSAGE")
		for _, d := range a.TriggerDiagnostics {
			pos := ""
			if d.LastEvent != nil {
				pos = d.LastEvent.Position
			}
			t.row("  "+d.Trigger, strconv.Itoa(d.Version), strconv.Itoa(d.Count), stamp(d.LastAt), pos, clip(d.LastMessage, 120))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if rs := a.IntakeRecords.Nodes; len(rs) > 0 {
		fmt.Fprintln(w, "intake records (events that matched but reached no session; newest first, at most 5):")
		t := newTable(w, "  TRIGGER", "VERSION", "POSITION", "SESSION", "REASON", "MESSAGE")
		for _, r := range rs {
			t.row("  "+r.Trigger, strconv.Itoa(r.Version), r.Event.Position, str(r.SessionId), r.Reason, clip(r.Message, 120))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}
