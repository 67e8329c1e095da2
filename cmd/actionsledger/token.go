package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/migrations"
)

type tokenCmd struct {
	Create tokenCreateCmd `cmd:"" help:"Create a principal's bearer token and print it (shown once)."`
}

type tokenCreateCmd struct {
	Principal string   `default:"admin" help:"Principal id (created if missing; its policies are replaced)."`
	Admin     bool     `help:"Grant ADMIN on * (everything, including token management)."`
	Policy    []string `help:"A policy ACTION=RESOURCE, e.g. READ=ledger:accounts (repeatable)."`
}

func (c *tokenCreateCmd) Run(ctx context.Context, g *globals, _ *slog.Logger) error {
	var pols []auth.Policy
	if c.Admin {
		pols = append(pols, auth.Policy{Action: auth.Admin, Resource: auth.All})
	}
	for _, s := range c.Policy {
		action, resource, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("--policy %q: write ACTION=RESOURCE", s)
		}
		pols = append(pols, auth.Policy{Action: strings.ToUpper(action), Resource: resource})
	}
	if len(pols) == 0 {
		return errors.New("give --admin or at least one --policy")
	}
	if err := migrations.Apply(ctx, g.DatabaseURL); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, g.DatabaseURL)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	iss, err := auth.NewStore(pool, clock.Real{}).CreateToken(ctx, c.Principal, pols)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "token %s for principal %q; it is shown only now:\n", iss.ID, iss.Principal.ID)
	fmt.Println(iss.Token)
	return nil
}
