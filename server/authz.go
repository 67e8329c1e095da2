package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// rule is what one field of a namespace object needs: the policy action and
// the resource, found from the field's arguments. A nil resource means the
// field needs only an authenticated principal (the namespaces themselves).
type rule struct {
	action   string
	resource func(args map[string]any) string
	// each, when set instead of resource, names one resource per item of a
	// bulk write: the principal needs action on every one.
	each func(args map[string]any) []string
}

func fixed(action, resource string) rule {
	return rule{action: action, resource: func(map[string]any) string { return resource }}
}

func namespaceArg(action string) rule {
	return rule{action: action, resource: func(a map[string]any) string {
		ns, _ := a["namespace"].(string)
		return auth.NamespaceResource(ns)
	}}
}

// recordNamespaces is putValues' rule: WRITE on the namespace of every
// record, as putValue needs for one.
func recordNamespaces(action string) rule {
	return rule{action: action, each: func(a map[string]any) []string {
		recs, _ := a["records"].([]ledger.ValueInput)
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = auth.NamespaceResource(r.Namespace)
		}
		return out
	}}
}

func actionArg(action, arg string) rule {
	return rule{action: action, resource: func(a map[string]any) string {
		id, ok := a[arg].(uuid.UUID)
		if !ok {
			return "" // covered by no policy but `*`
		}
		return auth.ActionResource(id)
	}}
}

// guarded are the objects whose every field is checked against fieldRules: the
// roots and the namespaces under them. Everything else is reached through
// one of their fields, so is covered by that field's check (reading an
// action covers its sessions, turns, inputs, executions and the events
// delivered to them).
var guarded = map[string]bool{
	"Query": true, "Mutation": true, "Subscription": true,
	"LedgerQuery": true, "LedgerMutation": true,
	"ActionsQuery": true, "ActionsMutation": true,
	"AuthQuery": true, "AuthMutation": true,
	"Viewer": true,
}

// rules maps "Type.field" to its check. A field of a guarded object missing
// here is refused (and TestEveryFieldHasARule fails).
var fieldRules = map[string]rule{
	"Query.actions": {},
	// Subscriptions mirror the queries they follow; the inbox filters by
	// what the principal may read inside the resolver.
	"Subscription.ledgerEvents":   fixed(auth.Read, auth.LedgerPrefix),
	"Subscription.sessionUpdates": actionArg(auth.Read, "actionId"),
	"Subscription.inboxUpdates":   {},
	"ActionsQuery.inbox":          {},
	"Query.ledger":                {},
	"Query.auth":                  {},
	"Query.viewer":                {},
	// The caller's own principal: any authenticated caller (issue 13).
	"Viewer.id":        {},
	"Viewer.dev":       {},
	"Viewer.policies":  {},
	"Mutation.actions": {},
	"Mutation.ledger":  {},
	"Mutation.auth":    {},

	"LedgerQuery.events":         fixed(auth.Read, auth.LedgerPrefix),
	"LedgerQuery.recentEvents":   fixed(auth.Read, auth.LedgerPrefix),
	"LedgerQuery.event":          fixed(auth.Read, auth.LedgerPrefix),
	"LedgerQuery.value":          namespaceArg(auth.Read),
	"LedgerQuery.values":         namespaceArg(auth.Read),
	"LedgerMutation.putValue":    namespaceArg(auth.Write),
	"LedgerMutation.appendEvent": fixed(auth.Write, auth.LedgerPrefix),
	// The bulk writes need what the single writes need, for every item.
	"LedgerMutation.appendEvents": fixed(auth.Write, auth.LedgerPrefix),
	"LedgerMutation.putValues":    recordNamespaces(auth.Write),

	"ActionsQuery.action":  actionArg(auth.Read, "id"),
	"ActionsQuery.actions": fixed(auth.Read, auth.ActionsDoc),
	// Issue 15: a dry run judges a definition as if it were stored.
	"ActionsQuery.dryRun":             actionArg(auth.Write, "actionId"),
	"ActionsMutation.createAction":    actionArg(auth.Write, "id"),
	"ActionsMutation.updateAction":    actionArg(auth.Write, "id"),
	"ActionsMutation.setActionStatus": actionArg(auth.Write, "id"),
	"ActionsMutation.cancelBackfill":  actionArg(auth.Write, "actionId"),
	"ActionsMutation.closeSession":    actionArg(auth.Close, "actionId"),
	"ActionsMutation.callTool":        actionArg(auth.Call, "actionId"),
	// P5, H5: answering needs RESPOND on the action's record.
	"ActionsMutation.respondToSession": actionArg(auth.Respond, "actionId"),
	// Issue 15: an operator's retry of a failed execution answers it, as
	// RETRY answers a held turn.
	"ActionsMutation.retryExecution": actionArg(auth.Respond, "actionId"),
	// G4, G10: resuming a session that waits after a failed turn answers
	// it, as RETRY answers a held turn.
	"ActionsMutation.resumeSession": actionArg(auth.Respond, "actionId"),
	// G1, G2, G5: messages and controls steer a session as answers do;
	// a retry of a FAILED session answers its failure.
	"ActionsMutation.sendToSession":       actionArg(auth.Respond, "actionId"),
	"ActionsMutation.editSessionInput":    actionArg(auth.Respond, "actionId"),
	"ActionsMutation.deleteSessionInput":  actionArg(auth.Respond, "actionId"),
	"ActionsMutation.promoteSessionInput": actionArg(auth.Respond, "actionId"),
	"ActionsMutation.retrySession":        actionArg(auth.Respond, "actionId"),
	// G6: archiving manages sessions as closing does.
	"ActionsMutation.archiveSession":   actionArg(auth.Close, "actionId"),
	"ActionsMutation.unarchiveSession": actionArg(auth.Close, "actionId"),
	"ActionsMutation.setSessionBudget": actionArg(auth.Close, "actionId"),
	// G7: a manual start delivers work as a trigger would.
	"ActionsMutation.startSession": actionArg(auth.Respond, "actionId"),
	// T9: a replay runs the action's code (and, when LIVE, its model calls).
	"ActionsMutation.replayExecution": actionArg(auth.Write, "actionId"),

	"AuthQuery.principals":     fixed(auth.Admin, auth.All),
	"AuthMutation.createToken": fixed(auth.Admin, auth.All),
	"AuthMutation.revokeToken": fixed(auth.Admin, auth.All),
}

// authorize checks every field of a guarded object against its rule before
// it resolves. A refusal is FORBIDDEN with one message for every case, so it
// says nothing about whether the resource exists.
func authorize(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || strings.HasPrefix(fc.Field.Name, "__") {
		return next(ctx)
	}
	if !guarded[fc.Object] {
		p, ok := auth.From(ctx)
		// A handler credential is checked on every field, not only the
		// namespaces: its grant is narrower than anything reachable.
		if ok && p.Session != nil && !sessionMayRead(p.Session, fc) {
			return nil, auth.Forbidden()
		}
		res, err := next(ctx)
		if err != nil || !ok || p.Session != nil {
			return res, err
		}
		return crossing(p, res)
	}
	p, ok := auth.From(ctx)
	if !ok {
		return nil, auth.Forbidden()
	}
	if p.Session != nil {
		if !sessionMayRead(p.Session, fc) {
			return nil, auth.Forbidden()
		}
		return next(ctx)
	}
	r, ok := fieldRules[fc.Object+"."+fc.Field.Name]
	if !ok {
		return nil, auth.Forbidden()
	}
	if r.resource != nil && !p.Allows(r.action, r.resource(fc.Args)) {
		return nil, auth.Forbidden()
	}
	if r.each != nil {
		for _, res := range r.each(fc.Args) {
			if !p.Allows(r.action, res) {
				return nil, auth.Forbidden()
			}
		}
	}
	return next(ctx)
}

// crossing checks an object reached below a namespace field that can
// belong to another action than the one the namespace check allowed: an
// execution's children (tool calls into other actions), a CALL input's
// caller, an execution's action or session, a tool call's session. The
// principal needs READ on that object's action; unreadable children are
// left out of the page, anything else is refused.
func crossing(p auth.Principal, res any) (any, error) {
	readable := func(id uuid.UUID) bool { return p.Allows(auth.Read, auth.ActionResource(id)) }
	switch v := res.(type) {
	case *turns.Execution:
		if v != nil && !readable(v.ActionID) {
			return nil, auth.Forbidden()
		}
	case *session.Session:
		if v != nil && !readable(v.ActionID) {
			return nil, auth.Forbidden()
		}
	case *action.Action:
		if v != nil && !readable(v.ID) {
			return nil, auth.Forbidden()
		}
	case *action.Version: // an approval request's tool action
		if v != nil && !readable(v.ActionID) {
			return nil, auth.Forbidden()
		}
	case *model.ExecutionConnection:
		if v != nil {
			kept := v.Nodes[:0:0]
			for _, x := range v.Nodes {
				if readable(x.ActionID) {
					kept = append(kept, x)
				}
			}
			v.Nodes = kept
		}
	}
	return res, nil
}

// sessionFields is everything a handler credential may resolve (T10), by
// object: true allows every field of the object but those listed in
// sessionDenied. Objects missing here are refused whole, so a field added to
// the schema later is readable only when it is a scalar of an allowed object.
// The path is actions { action(id: its action) { session(id: its session)
// { ... } } }; every link out of the session (back to the action, to
// executions, which reach tool calls and callers in other sessions, and to
// ledger records) is refused.
var sessionFields = map[string]bool{
	"Query": true, "ActionsQuery": true, "Action": true,
	"ActionSession": true, "ActionSessionTurnConnection": true, "ActionSessionTurn": true,
	"Checkpoint": true, "ActionSessionInputConnection": true, "ActionSessionInput": true,
	"Event": true, "PageInfo": true,
}

var sessionDenied = map[string]bool{
	"Query.ledger": true, "Query.auth": true, "Query.viewer": true,
	"ActionsQuery.actions":         true,
	"ActionsQuery.inbox":           true,
	"ActionSession.action":         true,
	"Event.sessions":               true,
	"ActionSessionTurn.execution":  true,
	"ActionSessionInput.execution": true,
	"ActionSessionInput.caller":    true,
	"Event.record":                 true,
}

// sessionMayRead reports whether a handler credential scoped to sc may
// resolve field fc.
func sessionMayRead(sc *auth.SessionScope, fc *graphql.FieldContext) bool {
	if !sessionFields[fc.Object] || sessionDenied[fc.Object+"."+fc.Field.Name] {
		return false
	}
	switch fc.Object + "." + fc.Field.Name {
	case "ActionsQuery.action":
		id, ok := fc.Args["id"].(uuid.UUID)
		return ok && id == sc.ActionID
	case "Action.session":
		id, ok := fc.Args["id"].(string)
		return ok && id == sc.SessionID
	}
	if fc.Object == "Action" {
		return fc.Field.Name == "id"
	}
	return true
}

// UncheckedFields lists the fields of the guarded objects in schema that
// have no rule, as "Type.field"; it is empty when every field is checked.
func UncheckedFields(schema *ast.Schema) []string {
	var out []string
	for name := range guarded {
		def := schema.Types[name]
		if def == nil {
			out = append(out, name+" (type missing from the schema)")
			continue
		}
		for _, f := range def.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			if _, ok := fieldRules[name+"."+f.Name]; !ok {
				out = append(out, name+"."+f.Name)
			}
		}
	}
	// Every namespace reachable from the roots must itself be guarded.
	for _, root := range []string{"Query", "Mutation"} {
		for _, f := range schema.Types[root].Fields {
			if t := f.Type.Name(); !strings.HasPrefix(f.Name, "__") && !guarded[t] {
				out = append(out, fmt.Sprintf("%s.%s returns %s, which is not guarded", root, f.Name, t))
			}
		}
	}
	sort.Strings(out)
	return out
}

// authTimeout bounds a token lookup, which runs before the GraphQL
// handler's request timeout starts (issue 10 item 1: no request's work
// outlives its deadline).
const authTimeout = 10 * time.Second

// MinAdminTokenLen is the shortest ADMIN_TOKEN accepted.
const MinAdminTokenLen = 32

// Authenticate requires a valid bearer token on every request and puts its
// principal on the context; anything else is refused with HTTP 401 and
// UNAUTHENTICATED. adminToken, when not empty, is one more valid token
// whose principal "admin" has ADMIN on `*`; it is compared by hash.
//
// A WebSocket upgrade without an Authorization header goes on without a
// principal: browsers cannot set headers on one, so graphql-transport-ws
// clients send the token in connection_init's payload instead, and the
// WebSocket transport checks it there with the same rules (wsInit) before
// any operation runs.
func Authenticate(store *auth.Store, adminToken string, log *slog.Logger, h http.Handler) http.Handler {
	return authenticate(store, adminToken, log, DefaultRecheck, h)
}

// DefaultRecheck is how often a stream's bearer token is checked again.
const DefaultRecheck = 30 * time.Second

// authenticate is Authenticate with the interval at which a stream's
// credential is checked again (see watchCredential).
func authenticate(store *auth.Store, adminToken string, log *slog.Logger, recheck time.Duration, h http.Handler) http.Handler {
	authn := tokenAuthenticator(store, adminToken, log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		if header == "" && isWebSocket(r) {
			ctx := context.WithValue(r.Context(), deferredAuthKey{}, deferred{authn, recheck})
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		p, fail := authn(r.Context(), header)
		if fail != nil {
			if fail.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="actionsledger"`)
			}
			writeError(w, fail.status, fail.code, fail.message)
			return
		}
		ctx := auth.With(r.Context(), p)
		if isWebSocket(r) || isEventStream(r) {
			ctx = watchCredential(ctx, authn, header, p, recheck)
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// deferred is what a WebSocket upgrade without credentials carries to its
// connection_init: how to check a token and how often to check it again.
type deferred struct {
	authn   authenticator
	recheck time.Duration
}

// watchCredential checks a stream's credential again every interval while
// ctx lasts (issue 12): a subscription outlives the request that opened it,
// so a token revoked, or whose principal's policies changed, ends the
// stream's subscriptions with UNAUTHENTICATED or FORBIDDEN (subscribing
// again takes the new policies). A check that fails for another reason
// (the database) is tried again at the next interval.
func watchCredential(ctx context.Context, authn authenticator, header string, p auth.Principal, interval time.Duration) context.Context {
	cred, end := context.WithCancelCause(context.Background())
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		defer end(nil)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now, fail := authn(ctx, header)
			switch {
			case fail == errUnauthenticated:
				end(fault.New(fault.Unauthenticated, "", "the bearer token is no longer valid"))
				return
			case fail == nil && !slices.Equal(now.Policies, p.Policies):
				end(fault.New(fault.Forbidden, "", "the principal's policies changed: subscribe again"))
				return
			}
		}
	}()
	return graph.WithCredential(ctx, cred)
}

// authenticator finds the principal of an Authorization header's value.
type authenticator func(ctx context.Context, header string) (auth.Principal, *authFailure)

// deferredAuthKey holds, for a WebSocket upgrade without credentials, the
// authenticator its connection_init is checked with.
type deferredAuthKey struct{}

// authFailure is why a request could not be authenticated: the HTTP status
// and code to answer with, and a message.
type authFailure struct {
	status        int
	code, message string
}

var errUnauthenticated = &authFailure{http.StatusUnauthorized, fault.Unauthenticated,
	"a valid bearer token is required (Authorization: Bearer <token>)"}

// principalFor checks a bearer token: a handler credential, the admin
// token (by hash), or a stored token.
func principalFor(ctx context.Context, store *auth.Store, adminHash []byte, log *slog.Logger, header string) (auth.Principal, *authFailure) {
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return auth.Principal{}, errUnauthenticated
	}
	if auth.IsCredential(token) {
		ctx, cancel := context.WithTimeout(ctx, authTimeout)
		p, err := store.AuthenticateCredential(ctx, token)
		cancel()
		switch {
		case errors.Is(err, auth.ErrUnknownCredential):
			return auth.Principal{}, errUnauthenticated
		case err != nil:
			return auth.Principal{}, authFailed(log, "authenticate handler credential", err)
		}
		return p, nil
	}
	hash := auth.Hash(token)
	if adminHash != nil && subtle.ConstantTimeCompare(hash, adminHash) == 1 {
		return auth.Principal{ID: "admin", Policies: []auth.Policy{{Action: auth.Admin, Resource: auth.All}}}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, authTimeout)
	p, err := store.Authenticate(ctx, token)
	cancel()
	switch {
	case errors.Is(err, auth.ErrUnknownToken):
		return auth.Principal{}, errUnauthenticated
	case err != nil:
		return auth.Principal{}, authFailed(log, "authenticate", err)
	}
	return p, nil
}

// authFailed explains a token lookup that failed: HTTP 503 TIMEOUT or
// UNAVAILABLE (both retryable) when it ran out of time or the database
// cannot be reached (issue 10 item 7), HTTP 500 INTERNAL otherwise.
func authFailed(log *slog.Logger, what string, err error) *authFailure {
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn(what+": timed out", "err", err)
		return &authFailure{http.StatusServiceUnavailable, fault.Timeout, "the token could not be checked in time; retry later"}
	}
	if unavailable(err) {
		log.Warn(what+": database unavailable", "err", err)
		return &authFailure{http.StatusServiceUnavailable, fault.Unavailable, "the database is unavailable; retry later"}
	}
	log.Error(what, "err", err)
	return &authFailure{http.StatusInternalServerError, fault.Internal, "internal error"}
}
