// Package auth carries the authenticated principal on a request's context
// and decides what it may do.
//
// A principal holds policies; a policy grants one policy action on one
// resource. Resources (the grammar, exactly):
//
//   - everything, including principals and tokens
//     financial.Action.document          every action, its sessions, turns and executions
//     financial.Action.document:<uuid>   one action (canonical lower-case UUID)
//     ledger                             the whole ledger: every event and namespace
//     ledger:<namespace>                 one key-value namespace
//
// A policy on a broader resource covers the narrower ones (`*` covers all,
// `financial.Action.document` covers each action, `ledger` each namespace),
// ADMIN covers every other policy action on the same resources (so ADMIN on
// `*` allows everything), and WRITE on an action covers CALL on it (its
// author may call the tool it defines). Managing principals and tokens needs
// ADMIN on `*`.
//
// A ledger namespace covers the key-value records of that namespace and the
// events whose type starts with the namespace and a dot (see
// EventNamespace): `ledger:entry` covers the records of namespace entry and
// the events entry.inserted and entry.updated.
//
// Action versions run with an authority of their own (see Authority and
// docs/security.md): what their author holds, intersected with what the
// definition declares it needs.
package auth

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Policy actions.
const (
	Read    = "READ"
	Write   = "WRITE"
	Respond = "RESPOND"
	Close   = "CLOSE"
	// Call: calling a tool action (callTool; call_tool and agent tool
	// references in action versions the principal stores).
	Call  = "CALL"
	Admin = "ADMIN"
)

// Resource names.
const (
	All          = "*"
	ActionsDoc   = "financial.Action.document"
	LedgerPrefix = "ledger"
)

// ActionResource names one action.
func ActionResource(id uuid.UUID) string { return ActionsDoc + ":" + id.String() }

// NamespaceResource names one ledger namespace.
func NamespaceResource(ns string) string { return LedgerPrefix + ":" + ns }

// Policy grants Action on Resource.
type Policy struct {
	Action   string
	Resource string
}

// Check reports whether p is well formed, as a BAD_USER_INPUT fault naming field.
func (p Policy) Check(field string) error {
	switch p.Action {
	case Read, Write, Respond, Close, Call, Admin:
	default:
		return fault.New(fault.BadInput, field+".action", "unknown policy action %q", p.Action)
	}
	r := p.Resource
	switch {
	case r == All, r == ActionsDoc, r == LedgerPrefix:
		return nil
	case strings.HasPrefix(r, ActionsDoc+":"):
		id, err := uuid.Parse(strings.TrimPrefix(r, ActionsDoc+":"))
		if err != nil || id.String() != strings.TrimPrefix(r, ActionsDoc+":") {
			return fault.New(fault.BadInput, field+".resource", "an action resource is %s:<uuid> in canonical lower-case form", ActionsDoc)
		}
		return nil
	case strings.HasPrefix(r, LedgerPrefix+":") && len(r) > len(LedgerPrefix)+1:
		return nil
	}
	return fault.New(fault.BadInput, field+".resource",
		"a resource is *, %s, %s:<action id>, ledger or ledger:<namespace>", ActionsDoc, ActionsDoc)
}

// covers reports whether policy resource r includes resource want.
func covers(r, want string) bool {
	switch {
	case r == want, r == All:
		return true
	case r == ActionsDoc:
		return strings.HasPrefix(want, ActionsDoc+":")
	case r == LedgerPrefix:
		return strings.HasPrefix(want, LedgerPrefix+":")
	}
	return false
}

// Principal is who is calling.
type Principal struct {
	// ID names the principal in records (e.g. a responder).
	ID string
	// Dev marks the no-credential principal of loopback dev mode, which may
	// do everything.
	Dev bool
	// Policies are what the principal may do.
	Policies []Policy
	// Session, when set, marks a handler credential's principal: it holds
	// no policies and may only read this one session (see credential.go).
	Session *SessionScope
}

// Allows reports whether p may do action on resource.
func (p Principal) Allows(action, resource string) bool {
	if p.Dev {
		return true
	}
	for _, pol := range p.Policies {
		if implies(pol.Action, action) && covers(pol.Resource, resource) {
			return true
		}
	}
	return false
}

// ReadableActions reports which actions p may READ (issue 12: the inbox
// filters by it): every action (all), or the ones listed. A handler
// credential's principal reads none this way.
func (p Principal) ReadableActions() (all bool, ids []uuid.UUID) {
	if p.Dev {
		return true, nil
	}
	for _, pol := range p.Policies {
		if !implies(pol.Action, Read) {
			continue
		}
		switch r := pol.Resource; {
		case r == All, r == ActionsDoc:
			return true, nil
		case strings.HasPrefix(r, ActionsDoc+":"):
			if id, err := uuid.Parse(strings.TrimPrefix(r, ActionsDoc+":")); err == nil {
				ids = append(ids, id)
			}
		}
	}
	return false, ids
}

// implies reports whether a policy for action have grants action want:
// ADMIN grants everything, WRITE grants CALL.
func implies(have, want string) bool {
	return have == want || have == Admin || (have == Write && want == Call)
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

// Forbidden is the one refusal: it names nothing about the resource, so a
// refusal reads the same whether or not the resource exists.
func Forbidden() error { return fault.New(fault.Forbidden, "", "not allowed") }

// Allow returns nil when the principal on ctx may do action on resource,
// else the refusal.
func Allow(ctx context.Context, action, resource string) error {
	p, ok := From(ctx)
	if !ok || !p.Allows(action, resource) {
		return Forbidden()
	}
	return nil
}
