package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/cli"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/migrations"
)

// tokenCmd is the database command for tokens: it writes to the database
// directly, for bootstrapping a server that has no admin token yet. The
// client command `tokens` does the same through the API.
type tokenCmd struct {
	Create tokenCreateCmd `cmd:"" help:"Create a bearer token by writing to the database directly, and print it (shown once): the bootstrap; through a server, use tokens create."`
}

type tokenCreateCmd struct {
	database
	Principal string   `default:"admin" help:"Principal id (created if missing; its policies are replaced)."`
	Admin     bool     `help:"Grant ADMIN on * (everything, including token management)."`
	Policy    []string `placeholder:"ACTION=RESOURCE" help:"A policy ACTION=RESOURCE, e.g. READ=ledger:accounts (repeatable)."`
}

// Validate checks the policies before the database is opened.
func (c *tokenCreateCmd) Validate() error {
	if err := c.database.Validate(); err != nil {
		return err
	}
	_, err := cli.ParsePolicies(c.Admin, c.Policy)
	return err
}

func (c *tokenCreateCmd) Run(ctx context.Context, _ *slog.Logger) error {
	parsed, err := cli.ParsePolicies(c.Admin, c.Policy)
	if err != nil {
		return err
	}
	pols := make([]auth.Policy, len(parsed))
	for i, p := range parsed {
		pols[i] = auth.Policy{Action: string(p.Action), Resource: p.Resource}
	}
	if err := migrations.Apply(ctx, c.DatabaseURL); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, c.DatabaseURL)
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
