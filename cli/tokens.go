package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/actionsledger/actionsledger/client"
)

// TokensCmd groups the token commands that go through the API's auth
// namespace (issue 6; they need ADMIN on *). The database command `token
// create` is the bootstrap for a server without any admin token yet.
type TokensCmd struct {
	Create TokensCreateCmd `cmd:"" help:"Create a principal (or replace its policies) and issue a bearer token for it; the token is shown once."`
	List   TokensListCmd   `cmd:"" help:"List principals with their policies and their tokens' ids (never the secrets), to revoke one."`
	Revoke TokensRevokeCmd `cmd:"" help:"Revoke a token by its id."`
}

// ParsePolicies turns --admin and --policy ACTION=RESOURCE flags into
// policies: ADMIN on * for admin, then each flag's (the action in any
// case). At least one is needed; an unknown action is an error.
func ParsePolicies(admin bool, flags []string) ([]client.PolicyInput, error) {
	var pols []client.PolicyInput
	if admin {
		pols = append(pols, client.PolicyInput{Action: client.PolicyActionAdmin, Resource: "*"})
	}
	for _, f := range flags {
		action, resource, ok := strings.Cut(f, "=")
		a := client.PolicyAction(upper(action))
		if !ok || strings.TrimSpace(resource) == "" {
			return nil, fmt.Errorf("--policy %q: write ACTION=RESOURCE, e.g. READ=ledger:accounts", f)
		}
		if !slices.Contains(client.AllPolicyAction, a) {
			return nil, fmt.Errorf("--policy %q: the action is one of %v", f, client.AllPolicyAction)
		}
		pols = append(pols, client.PolicyInput{Action: a, Resource: strings.TrimSpace(resource)})
	}
	if len(pols) == 0 {
		return nil, errors.New("give --admin or at least one --policy ACTION=RESOURCE")
	}
	return pols, nil
}

// TokensCreateCmd is `tokens create PRINCIPAL --policy ACTION=RESOURCE ...
// [--admin]`.
type TokensCreateCmd struct {
	Principal string   `arg:"" help:"The principal's id (created if missing; its policies are replaced, for all its tokens)."`
	Policy    []string `placeholder:"ACTION=RESOURCE" help:"A policy, e.g. READ=ledger or RESPOND=financial.Action.document:<action id> (repeatable)."`
	Admin     bool     `help:"Grant ADMIN on * (everything)."`
}

// Validate checks the policies.
func (c *TokensCreateCmd) Validate() error {
	_, err := ParsePolicies(c.Admin, c.Policy)
	return err
}

// Run creates the token. The table output prints the token alone on
// standard output (and what it is on standard error), so that
// TOKEN=$(actionsledger tokens create ...) works.
func (c *TokensCreateCmd) Run(ctx context.Context, env *Env) error {
	pols, err := ParsePolicies(c.Admin, c.Policy)
	if err != nil {
		return usageError{err}
	}
	r, err := client.CreateToken(ctx, env.Client, c.Principal, pols)
	if err != nil {
		return err
	}
	t := r.Auth.CreateToken
	if t == nil {
		return orNoAnswer(nil, "createToken")
	}
	return env.emit(t, func(w io.Writer) error {
		var ps []string
		for _, p := range t.Principal.Policies {
			ps = append(ps, string(p.Action)+"="+p.Resource)
		}
		fmt.Fprintf(env.Stderr, "token %s for principal %q (%s); it is shown only now:\n", t.Id, t.Principal.Id, strings.Join(ps, " "))
		_, err := fmt.Fprintln(w, t.Token)
		return err
	})
}

// TokensListCmd is `tokens list [--revoked]`.
type TokensListCmd struct {
	Revoked bool `help:"List revoked tokens too."`
}

// Run lists the principals with their policies and tokens (ids and times,
// never secrets), a row per token; JSON output is an array of principals.
func (c *TokensListCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.Principals(ctx, env.Client, &c.Revoked)
	if err != nil {
		return err
	}
	ps := r.Auth.Principals
	if ps == nil {
		ps = []client.Principal{}
	}
	return env.emit(ps, func(w io.Writer) error {
		t := newTable(w, "PRINCIPAL", "TOKEN", "CREATED", "REVOKED", "POLICIES")
		for _, p := range ps {
			var pols []string
			for _, x := range p.Policies {
				pols = append(pols, string(x.Action)+"="+x.Resource)
			}
			if len(p.Tokens) == 0 {
				t.row(p.Id, "-", "-", "-", strings.Join(pols, " "))
			}
			for _, tok := range p.Tokens {
				revoked := "-"
				if tok.RevokedAt != nil {
					revoked = stamp(*tok.RevokedAt)
				}
				t.row(p.Id, tok.Id, stamp(tok.CreatedAt), revoked, strings.Join(pols, " "))
			}
		}
		return t.flush()
	})
}

// TokensRevokeCmd is `tokens revoke ID`.
type TokensRevokeCmd struct {
	ID string `arg:"" help:"The token's id (printed when it was created)."`
}

// Run revokes the token; an unknown or already revoked id is not found
// (exit 4).
func (c *TokensRevokeCmd) Run(ctx context.Context, env *Env) error {
	r, err := client.RevokeToken(ctx, env.Client, c.ID)
	if err != nil {
		return err
	}
	if r.Auth.RevokeToken == nil || !*r.Auth.RevokeToken {
		return notFound("live token %s (unknown, or revoked already)", c.ID)
	}
	return env.emit(map[string]any{"id": c.ID, "revoked": true}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "revoked token %s\n", c.ID)
		return err
	})
}
