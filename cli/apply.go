package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/actionsledger/actionsledger/client"
)

// ApplyCmd is `apply -f FILE`: store the action a document describes
// (issue 12, CLI; A1, A2).
type ApplyCmd struct {
	File string `short:"f" required:"" placeholder:"FILE" help:"YAML or JSON document: the action's id and the fields of ActionInput (name, kind, config, triggers, session, tool, permissions); - reads standard input."`
	From string `placeholder:"POSITION" help:"Backfill: the new version's triggers also judge the events from this ledger position on (1: the whole ledger), then follow live. Nothing when the definition is unchanged."`
}

// applied is apply's result, and its JSON output.
type applied struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version int    `json:"version"`
	// Result is created, updated (a new version) or unchanged (the
	// definition equals the current one; no new version).
	Result string `json:"result"`
}

// Run creates the action when its id is unknown, and otherwise updates it;
// the server keeps the current version when the definition is unchanged.
func (c *ApplyCmd) Run(ctx context.Context, env *Env) error {
	doc, err := c.read(env.Stdin)
	if err != nil {
		return err
	}
	var from *string
	if c.From != "" {
		from = &c.From
	}
	res, err := apply(ctx, env.Client, doc, from)
	if err != nil {
		return err
	}
	return env.emit(res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "action %s (%s) %s: version %d\n", res.ID, res.Name, res.Result, res.Version)
		return err
	})
}

func (c *ApplyCmd) read(stdin io.Reader) (actionDocument, error) {
	if c.File == "-" {
		return readActionDocument(stdin, "standard input")
	}
	f, err := os.Open(c.File)
	if err != nil {
		return actionDocument{}, usageError{err}
	}
	defer f.Close()
	return readActionDocument(f, c.File)
}

func apply(ctx context.Context, c *client.Client, doc actionDocument, from *string) (applied, error) {
	cur, err := client.ActionVersion(ctx, c, doc.ID)
	if err != nil {
		return applied{}, err
	}
	if cur.Actions.Action == nil {
		made, err := client.CreateAction(ctx, c, doc.ID, doc.Input, from)
		switch {
		case err == nil && made.Actions.CreateAction != nil:
			v := made.Actions.CreateAction
			return applied{ID: v.ActionId, Name: v.Definition.Name, Version: v.Version, Result: "created"}, nil
		case client.CodeOf(err) != "ACTION_EXISTS":
			return applied{}, orNoAnswer(err, "createAction")
		}
		// Someone created it meanwhile: update it as if it had been there.
		if cur, err = client.ActionVersion(ctx, c, doc.ID); err != nil {
			return applied{}, err
		}
		if cur.Actions.Action == nil {
			return applied{}, notFound("action %s", doc.ID)
		}
	}
	prev := cur.Actions.Action.Version
	up, err := client.UpdateAction(ctx, c, doc.ID, doc.Input, from)
	if err != nil || up.Actions.UpdateAction == nil {
		return applied{}, orNoAnswer(err, "updateAction")
	}
	v := up.Actions.UpdateAction
	res := applied{ID: v.ActionId, Name: v.Definition.Name, Version: v.Version, Result: "updated"}
	if v.Version == prev {
		res.Result = "unchanged"
	}
	return res, nil
}

// orNoAnswer returns err, or for a null answer without errors (which the
// API does not give) an error saying so.
func orNoAnswer(err error, field string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("the server answered %s with null and no error", field)
}
