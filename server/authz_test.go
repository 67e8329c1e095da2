package server_test

// Issue 6, authorisation: bearer tokens, policies per resource, admin-only
// token management, FORBIDDEN refusals that say nothing about the resource,
// UNAUTHENTICATED (HTTP 401) without a valid token, and the dev mode rule
// for non-loopback addresses.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/graph"
	"github.com/actionsledger/actionsledger/server"
)

const adminToken = "test-admin-token-0123456789abcdef-0123456789"

// authEnv is a stepped env with AUTH on: e.srv acts as the ADMIN_TOKEN
// principal (set-up operations), e.authed requires bearer tokens.
type authEnv struct {
	*env
	authed *httptest.Server
}

func newAuthEnv(t *testing.T) *authEnv {
	t.Helper()
	e := newSteppedEnv(t, server.Config{Auth: true, AdminToken: adminToken})
	h := e.app.AuthHandler()
	authed := httptest.NewServer(h)
	t.Cleanup(authed.Close)
	// Actions stored by the dev principal hold nothing under AUTH (issue
	// 11): set up as the admin, as an operator of such a server would.
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+adminToken)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return &authEnv{env: e, authed: authed}
}

// as sends an operation with token ("" for no Authorization header).
func (e *authEnv) as(t *testing.T, token, query string, vars map[string]any) response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, e.authed.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.authed.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r response
	require.NoError(t, json.Unmarshal(raw, &r), "not JSON: %s", raw)
	r.Status = resp.StatusCode
	return r
}

func (e *authEnv) allowed(t *testing.T, token, query string, vars map[string]any) response {
	t.Helper()
	r := e.as(t, token, query, vars)
	require.Empty(t, r.Errors, "errors: %+v", r.Errors)
	require.Equal(t, http.StatusOK, r.Status)
	return r
}

// forbidden requires the one refusal and returns its message.
func (e *authEnv) forbidden(t *testing.T, token, query string, vars map[string]any) string {
	t.Helper()
	r := e.as(t, token, query, vars)
	ge := requireError(t, r, "FORBIDDEN", "")
	require.Len(t, r.Errors, 1)
	return ge.Message
}

const createTokenOp = `mutation($p: String!, $pol: [PolicyInput!]!) { auth {
  createToken(principal: $p, policies: $pol) { id token principal { id policies { action resource } } } } }`

// token has the admin create a token for principal with policies.
func (e *authEnv) token(t *testing.T, principal string, policies ...map[string]any) (id, token string) {
	t.Helper()
	if policies == nil {
		policies = []map[string]any{}
	}
	r := e.allowed(t, adminToken, createTokenOp, map[string]any{"p": principal, "pol": policies})
	var out struct {
		Auth struct{ CreateToken struct{ ID, Token string } }
	}
	require.NoError(t, json.Unmarshal(r.Data, &out))
	require.NotEmpty(t, out.Auth.CreateToken.Token)
	return out.Auth.CreateToken.ID, out.Auth.CreateToken.Token
}

func pol(action, resource string) map[string]any {
	return map[string]any{"action": action, "resource": resource}
}

const (
	readSessionOp = `query($a: UUID!, $s: String!) { actions { action(id: $a) { id session(id: $s) { status } } } }`
	closeOp       = `mutation($a: UUID!, $s: String!) { actions { closeSession(actionId: $a, id: $s, reason: "r") { status } } }`
)

func TestAuthEveryNamespaceFieldHasARule(t *testing.T) {
	t.Parallel()
	schema := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}}).Schema()
	require.Empty(t, server.UncheckedFields(schema), "fields without an authorisation rule")
}

// Two principals on the same action: the operator may RESPOND and CLOSE, the
// reader may only READ.
func TestAuthTwoPrincipalsOnOneAction(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	a, other := uuid.NewString(), uuid.NewString()
	e.ok(t, createActionOp, map[string]any{"id": a, "input": monitorDef()}, nil)
	e.ok(t, createActionOp, map[string]any{"id": other, "input": monitorDef()}, nil)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	_, err := e.app.Dispatcher.DispatchOnce(context.Background())
	require.NoError(t, err)

	_, operator := e.token(t, "operator", pol("RESPOND", "financial.Action.document:"+a), pol("CLOSE", "financial.Action.document:"+a))
	_, reader := e.token(t, "reader", pol("READ", "financial.Action.document:"+a))
	vars := map[string]any{"a": a, "s": acct}

	// Reads per resource.
	e.allowed(t, reader, readSessionOp, vars)
	msgOther := e.forbidden(t, reader, readSessionOp, map[string]any{"a": other, "s": acct})
	msgMissing := e.forbidden(t, reader, readSessionOp, map[string]any{"a": uuid.NewString(), "s": acct})
	require.Equal(t, msgOther, msgMissing, "a refusal reads the same whether or not the action exists")
	require.NotContains(t, msgOther, other)
	e.forbidden(t, reader, `{ actions { actions { nodes { id } } } }`, nil)
	e.forbidden(t, reader, `{ ledger { events { nodes { id } } } }`, nil)
	e.forbidden(t, operator, readSessionOp, vars)

	// closeSession: the reader may not, the operator may, on its action only.
	e.forbidden(t, reader, closeOp, vars)
	e.forbidden(t, operator, closeOp, map[string]any{"a": other, "s": acct})
	r := e.allowed(t, operator, closeOp, vars)
	require.JSONEq(t, `{"actions":{"closeSession":{"status":"CANCELLED"}}}`, string(r.Data))

	// Neither may manage tokens or list principals.
	for _, tok := range []string{reader, operator} {
		e.forbidden(t, tok, createTokenOp, map[string]any{"p": "x", "pol": []any{pol("ADMIN", "*")}})
		e.forbidden(t, tok, `{ auth { principals { id } } }`, nil)
		e.forbidden(t, tok, `mutation($id: UUID!) { auth { revokeToken(id: $id) } }`, map[string]any{"id": uuid.NewString()})
	}
}

// Ledger reads and writes per namespace.
func TestAuthLedgerNamespaces(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	_, writer := e.token(t, "writer", pol("WRITE", "ledger:entry"), pol("READ", "ledger:account"))
	put := `mutation($ns: String!) { ledger { putValue(namespace: $ns, key: "k", value: 1) { version } } }`
	get := `query($ns: String!) { ledger { value(namespace: $ns, key: "k") { version } } }`
	e.allowed(t, writer, put, map[string]any{"ns": "entry"})
	e.forbidden(t, writer, put, map[string]any{"ns": "account"})
	e.forbidden(t, writer, `mutation { ledger { appendEvent(type: "x.y", data: 1) { id } } }`, nil)
	e.forbidden(t, writer, get, map[string]any{"ns": "entry"})
	e.allowed(t, writer, get, map[string]any{"ns": "account"})
	e.forbidden(t, writer, `{ ledger { values(namespace: "entry") { nodes { key } } } }`, nil)

	_, all := e.token(t, "ledger-writer", pol("WRITE", "ledger"))
	e.allowed(t, all, put, map[string]any{"ns": "account"})
	e.allowed(t, all, `mutation { ledger { appendEvent(type: "x.y", data: 1) { id } } }`, nil)
}

// Admin-only token management: principals are listed with their policies,
// never their tokens; a revoked token is refused with UNAUTHENTICATED.
func TestAuthTokensAndRevocation(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	id, tok := e.token(t, "reader", pol("READ", "ledger"))
	require.Regexp(t, `^alt_[A-Za-z0-9_-]{43}$`, tok)
	_, admin2 := e.token(t, "second-admin", pol("ADMIN", "*"))
	e.allowed(t, tok, `{ ledger { events { nodes { id } } } }`, nil)

	r := e.allowed(t, admin2, `{ auth { principals { id policies { action resource } } } }`, nil)
	require.JSONEq(t, `{"auth":{"principals":[
	  {"id":"reader","policies":[{"action":"READ","resource":"ledger"}]},
	  {"id":"second-admin","policies":[{"action":"ADMIN","resource":"*"}]}]}}`, string(r.Data))
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM auth_tokens WHERE hash = convert_to($1, 'UTF8')`, tok),
		"only the hash is stored")

	revoke := `mutation($id: UUID!) { auth { revokeToken(id: $id) } }`
	require.JSONEq(t, `{"auth":{"revokeToken":true}}`, string(e.allowed(t, admin2, revoke, map[string]any{"id": id}).Data))
	require.JSONEq(t, `{"auth":{"revokeToken":false}}`, string(e.allowed(t, admin2, revoke, map[string]any{"id": id}).Data))

	for _, bad := range []string{tok, "", "alt_nope"} {
		r := e.as(t, bad, `{ ledger { events { nodes { id } } } }`, nil)
		require.Equal(t, http.StatusUnauthorized, r.Status)
		requireError(t, r, "UNAUTHENTICATED", "")
	}

	// Bad policies are refused with the field at fault.
	r = e.as(t, adminToken, createTokenOp, map[string]any{"p": "x", "pol": []any{pol("READ", "ledger:")}})
	requireError(t, r, "BAD_USER_INPUT", "policies[0].resource")
}

// Dev mode serves loopback only; any other address needs AUTH=on.
func TestAuthDevModeLoopbackOnly(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	app, err := server.New(context.Background(), server.Config{DatabaseURL: newSteppedEnv(t, server.Config{}).app.Pool.Config().ConnString(), Addr: "0.0.0.0:0"}, log)
	require.NoError(t, err)
	defer app.Close()
	err = app.Run(context.Background())
	require.ErrorContains(t, err, "requires AUTH=on")

	_, err = server.New(context.Background(), server.Config{DatabaseURL: "postgres://unused", AdminToken: "short"}, log)
	require.ErrorContains(t, err, "ADMIN_TOKEN")
}
