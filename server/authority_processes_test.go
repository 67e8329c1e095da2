package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/server"
)

// Issue 11 item 5: authorities across processes and configurations. Each
// App here is what one process holds (its own caches); they share only the
// database, as serve and worker processes do.

// processOn is a stepped service on database url with cfg (AUTH, ADMIN_TOKEN).
func processOn(t *testing.T, url string, cfg server.Config) *env {
	t.Helper()
	logs := &logBuffer{}
	cfg.DatabaseURL = url
	cfg.Clock = clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	app, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	require.NoError(t, err)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() {
		srv.Close()
		app.Close()
	})
	return &env{app: app, srv: srv, logs: logs}
}

// authedOn is processOn with AUTH on; e.srv sends token (when set) with
// every request.
func authedOn(t *testing.T, url, adminToken, token string) *authEnv {
	t.Helper()
	e := processOn(t, url, server.Config{Auth: true, AdminToken: adminToken})
	h := e.app.AuthHandler()
	authed := httptest.NewServer(h)
	t.Cleanup(authed.Close)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return &authEnv{env: e, authed: authed}
}

// payrollReader is an action over namespace entry whose turns read the
// payroll record, as its state.
func payrollReader() map[string]any {
	def := entryAction("starlark", "def turn(event):\n    return {\"state\": {\"pay\": ledger.get(\"payroll\", \"ceo\")}, \"status\": \"OPEN\"}\n")
	def["permissions"] = map[string]any{"read": []string{"payroll"}}
	return def
}

// sessionOf reads a session's status and state through e (as e.srv acts).
func sessionOf(t *testing.T, e *env, actionID, id string) (status, state string) {
	t.Helper()
	var out struct {
		Actions struct {
			Action struct {
				Session *struct {
					Status string
					State  json.RawMessage
				}
			}
		}
	}
	r := e.do(t, `query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) { status state } } } }`,
		map[string]any{"a": actionID, "s": id})
	require.Empty(t, r.Errors, "%+v", r.Errors)
	require.NoError(t, json.Unmarshal(r.Data, &out))
	if out.Actions.Action.Session == nil {
		return "", ""
	}
	return out.Actions.Action.Session.Status, string(out.Actions.Action.Session.State)
}

// A policy change made through one process applies in another at its next
// turn: the policy epoch lives in the database (auth_state), which every
// process reads before it trusts its cache of authors' policies.
func TestAuthorityPolicyEpochReachesEveryProcess(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	api := authedOn(t, url, adminToken, adminToken)
	worker := processOn(t, url, server.Config{Auth: true, AdminToken: adminToken})
	m := uuid.NewString()
	policies := []map[string]any{pol("WRITE", "financial.Action.document:"+m), pol("READ", "financial.Action.document:"+m),
		pol("READ", "ledger:entry"), pol("WRITE", "ledger:entry"), pol("READ", "ledger:payroll")}
	_, author := api.token(t, "author", policies...)
	api.put(t, "payroll", "ceo", map[string]any{"salary": 5}, "")
	api.allowed(t, author, createActionOp, map[string]any{"id": m, "input": payrollReader()})
	turn := func(key string) string {
		for _, v := range []map[string]any{{"k": key}, {"k": key, "n": 1}} {
			api.allowed(t, author, putValueOp, map[string]any{"ns": "entry", "key": key, "value": v})
		}
		worker.step(t) // only the worker dispatches and runs turns
		status, _ := sessionOf(t, api.env, m, key)
		return status
	}
	require.Equal(t, "OPEN", turn("a"), "the worker's cache now holds the author's policies")
	_, author = api.token(t, "author", policies[:4]...) // through the API process
	require.Equal(t, "FAILED", turn("b"), "the worker saw the new epoch")
}

// Versions stored in dev mode (author dev) hold nothing once the same
// database is served with AUTH on: their triggers see no event and their
// code reaches nothing, until someone with the grants stores them again.
func TestAuthorityDevVersionsUnderAuth(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	dev := processOn(t, url, server.Config{})
	m := uuid.NewString()
	dev.ok(t, createActionOp, map[string]any{"id": m, "input": payrollReader()}, nil)
	dev.put(t, "payroll", "ceo", map[string]any{"salary": 5}, "")
	dev.put(t, "entry", "d", map[string]any{"k": "d"}, "")
	dev.put(t, "entry", "d", map[string]any{"k": "d", "n": 1}, "")
	dev.step(t)
	status, state := sessionOf(t, dev, m, "d")
	require.Equal(t, "OPEN", status)
	jsonEq(t, `{"pay": {"salary": 5}}`, json.RawMessage(state))
	dev.app.Close()

	on := authedOn(t, url, adminToken, adminToken)
	var v struct {
		Actions struct {
			Action struct{ Versions []struct{ Author string } }
		}
	}
	on.ok(t, `query($a: UUID!) { actions { action(id: $a) { versions { author } } } }`, map[string]any{"a": m}, &v)
	require.Equal(t, "dev", v.Actions.Action.Versions[0].Author)
	on.put(t, "entry", "x", map[string]any{"k": "x"}, "")
	on.step(t)
	status, _ = sessionOf(t, on.env, m, "x")
	require.Empty(t, status, "the dev version sees no event under AUTH")
	// The same session's next event is not delivered either.
	on.put(t, "entry", "d", map[string]any{"k": "d", "n": 2}, "")
	on.step(t)
	require.Equal(t, 1, on.countRows(t, `SELECT count(*) FROM session_turns t JOIN sessions s USING (sid) WHERE s.action_id = $1`, m))

	// Stored again by the admin, it runs with the grants.
	on.ok(t, updateActionOp, map[string]any{"id": m, "input": payrollReader()}, nil)
	on.put(t, "entry", "y", map[string]any{"k": "y"}, "")
	on.put(t, "entry", "y", map[string]any{"k": "y", "n": 1}, "")
	on.step(t)
	status, state = sessionOf(t, on.env, m, "y")
	require.Equal(t, "OPEN", status)
	jsonEq(t, `{"pay": {"salary": 5}}`, json.RawMessage(state))
}

// A version stored with ADMIN_TOKEN has author admin, which holds ADMIN
// on `*` while the server has an ADMIN_TOKEN; served without one, the
// policies stored for principal admin apply (none: it reaches nothing;
// those of `token create --admin`: everything again).
func TestAuthorityAdminAuthorWithAndWithoutAdminToken(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	withToken := authedOn(t, url, adminToken, adminToken)
	m := uuid.NewString()
	withToken.ok(t, createActionOp, map[string]any{"id": m, "input": payrollReader()}, nil)
	withToken.put(t, "payroll", "ceo", map[string]any{"salary": 5}, "")
	run := func(e *authEnv, key string) string {
		t.Helper()
		// Written straight to the store: the process under test may have
		// no token that can write.
		for _, v := range []map[string]any{{"k": key}, {"k": key, "n": 1}} {
			_, err := e.app.Ledger.PutValue(t.Context(), "entry", key, jsonvalue.Value(mustJSON(v)), "")
			require.NoError(t, err)
		}
		e.step(t)
		var status string
		require.NoError(t, e.app.Pool.QueryRow(t.Context(), `SELECT coalesce((SELECT status FROM sessions WHERE action_id = $1 AND id = $2), '')`, m, key).Scan(&status))
		return status
	}
	require.Equal(t, "OPEN", run(withToken, "a"))
	withToken.app.Close()

	without := authedOn(t, url, "", "")
	require.Empty(t, run(without, "b"), "admin holds nothing stored: its version sees no entry event")
	_, err := without.app.Auth.CreateToken(t.Context(), auth.AdminID, []auth.Policy{{Action: auth.Admin, Resource: auth.All}}) // token create --admin
	require.NoError(t, err)
	require.Equal(t, "OPEN", run(without, "c"), "the stored policies of principal admin apply")
}
