// Package auth carries the authenticated principal on a request's context.
// This build knows one principal, the loopback dev principal that `make run`
// uses; token authentication and policies plug in here later (issue 6).
package auth

import (
	"context"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Principal is who is calling.
type Principal struct {
	// ID names the principal in records (e.g. a responder).
	ID string
	// Dev marks the no-credential principal of loopback dev mode.
	Dev bool
}

type key struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p Principal) context.Context { return context.WithValue(ctx, key{}, p) }

// From returns the principal on ctx.
func From(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(key{}).(Principal)
	return p, ok
}

// Require returns the principal on ctx or a fault.Forbidden error.
func Require(ctx context.Context) (Principal, error) {
	p, ok := From(ctx)
	if !ok {
		return Principal{}, fault.New(fault.Forbidden, "", "not allowed")
	}
	return p, nil
}
