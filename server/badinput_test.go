package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

const appendEventOp = `mutation($type: String!, $data: JSON!, $ik: String) {
  ledger { appendEvent(type: $type, data: $data, idempotencyKey: $ik) { id } } }`

// operation builds a request body from a query and its variables.
func operation(query string, vars map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		panic(err)
	}
	return b
}

func putBody(ns, key string, value any) []byte {
	return operation(putValueOp, map[string]any{"ns": ns, "key": key, "value": value})
}

// deepQuery nests value -> event -> record -> ... levels selections deep.
func deepQuery(levels int) string {
	var b strings.Builder
	b.WriteString(`{ ledger { value(namespace: "a", key: "b") { `)
	depth := 3 // ledger, value and the innermost leaf
	for depth+2 <= levels {
		b.WriteString(`event { record { ... on KVValue { `)
		depth += 2
	}
	b.WriteString("key")
	for range (depth - 3) / 2 {
		b.WriteString(" } } }")
	}
	b.WriteString(" } } }")
	return b.String()
}

// aliasedEvents asks for n aliases of a full page of events.
func aliasedEvents(n int) string {
	var b strings.Builder
	b.WriteString("{ ledger {")
	for i := range n {
		fmt.Fprintf(&b, " e%d: events(first: 500) { nodes { id data } }", i)
	}
	b.WriteString(" } }")
	return b.String()
}

// TestLedgerRejectsBadInput sends malformed requests and arguments: each
// fails with a stable extensions.code (and extensions.field where one
// argument is at fault), writes nothing, and leaves the server answering
// (HARD-PARTS 7; L2, L3, L4).
func TestLedgerRejectsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.put(t, "seen", "k", map[string]any{"n": 1}, "") // something to page over
	tooLong := strings.Repeat("x", 1<<20)
	deep := any("leaf")
	for range 70 {
		deep = []any{deep}
	}
	valuesCursor := e.valuesCursor(t)

	cases := []struct {
		name   string
		body   []byte
		code   string
		field  string // "" when no one argument is at fault
		status int    // expected HTTP status; 0: 200
	}{
		// NUL characters (jsonb and text reject them).
		{name: "NUL in a value string", body: putBody("ns", "k", map[string]any{"s": "a\x00b"}), code: "INVALID_JSON", field: "value"},
		{name: "NUL in a value key", body: putBody("ns", "k", map[string]any{"a\x00": 1}), code: "INVALID_JSON", field: "value"},
		{name: "NUL in a key", body: putBody("ns", "k\x00", 1), code: "BAD_USER_INPUT", field: "key"},
		{name: "NUL in a namespace", body: putBody("n\x00s", "k", 1), code: "BAD_USER_INPUT", field: "namespace"},
		{name: "NUL in an idempotency key", body: operation(putValueOp, map[string]any{"ns": "ns", "key": "k", "value": 1, "ik": "i\x00"}), code: "BAD_USER_INPUT", field: "idempotencyKey"},
		{name: "NUL in event data", body: operation(appendEventOp, map[string]any{"type": "a.b", "data": []any{"\x00"}}), code: "INVALID_JSON", field: "data"},
		{name: "NUL in a literal key", body: operation(`mutation { ledger { putValue(namespace: "ns", key: "k\u0000", value: 1) { key } } }`, nil), code: "BAD_USER_INPUT", field: "key"},
		{name: "NUL in a query argument", body: operation(`{ ledger { value(namespace: "ns", key: "k\u0000") { key } } }`, nil), code: "BAD_USER_INPUT", field: "key"},
		// Shapes and sizes of values and names.
		{name: "value over 1 MiB", body: putBody("ns", "k", tooLong), code: "PAYLOAD_TOO_LARGE", field: "value"},
		{name: "value nested too deep", body: putBody("ns", "k", deep), code: "INVALID_JSON", field: "value"},
		{name: "namespace with a space", body: putBody("n s", "k", 1), code: "BAD_USER_INPUT", field: "namespace"},
		{name: "empty key", body: putBody("ns", "", 1), code: "BAD_USER_INPUT", field: "key"},
		{name: "reserved type schedule.", body: operation(appendEventOp, map[string]any{"type": "schedule.fired", "data": 1}), code: "RESERVED_EVENT_TYPE", field: "type"},
		{name: "reserved type action_session.", body: operation(appendEventOp, map[string]any{"type": "action_session.responded", "data": 1}), code: "RESERVED_EVENT_TYPE", field: "type"},
		{name: "reserved record type", body: operation(appendEventOp, map[string]any{"type": "account.inserted", "data": 1}), code: "RESERVED_EVENT_TYPE", field: "type"},
		{name: "malformed event type", body: operation(appendEventOp, map[string]any{"type": "no spaces", "data": 1}), code: "BAD_USER_INPUT", field: "type"},
		// UUIDs.
		{name: "bad UUID literal", body: operation(`{ actions { action(id: "not-a-uuid") { id } } }`, nil), code: "BAD_USER_INPUT", field: "id"},
		{name: "bad UUID variable", body: operation(`query($id: UUID!) { ledger { event(id: $id) { id } } }`, map[string]any{"id": "1234"}), code: "BAD_USER_INPUT", field: "id"},
		{name: "UUID without hyphens", body: operation(`query($id: UUID!) { ledger { event(id: $id) { id } } }`, map[string]any{"id": strings.ReplaceAll(uuid.NewString(), "-", "")}), code: "BAD_USER_INPUT", field: "id"},
		{name: "UUID of the wrong type", body: operation(`query($id: UUID!) { ledger { event(id: $id) { id } } }`, map[string]any{"id": 12}), code: "BAD_USER_INPUT", field: "id"},
		// Unknown fields and wrong types: HTTP 200 under application/json, as GraphQL over HTTP asks (issue 12; it was 422).
		{name: "unknown field", body: operation(`{ ledger { nope } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		{name: "unknown argument", body: operation(`{ ledger { events(last: 1) { nodes { id } } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		{name: "literal of the wrong type", body: operation(`mutation { ledger { putValue(namespace: 5, key: "k", value: 1) { key } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", field: "namespace", status: http.StatusOK},
		{name: "literal of the wrong type in a fragment", body: operation(`query { ...f } fragment f on Query { ledger { events(first: "ten") { nodes { id } } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", field: "first", status: http.StatusOK},
		{name: "unknown enum value", body: operation(`{ actions { inbox(kind: BOGUS) { totalCount } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", field: "kind", status: http.StatusOK},
		{name: "literal of the wrong type inside an input object", body: operation(`mutation { actions { createAction(id: "`+uuid.NewString()+`", input: {name: "x", kind: "agent.echo", triggers: [{name: "t", event: 5}]}) { id } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", field: "input.triggers[0].event", status: http.StatusOK},
		{name: "missing field of an input object", body: operation(`mutation { actions { createAction(id: "`+uuid.NewString()+`", input: {name: "x", kind: "agent.echo", triggers: [{event: "true"}]}) { id } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", field: "input.triggers[0].name", status: http.StatusOK},
		{name: "variable of the wrong type", body: putBody("ns", "k", nil), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		// gqlparser coerces a number variable to String (its decimal text), so a boolean it is.
		{name: "variable of the wrong type (boolean for string)", body: operation(putValueOp, map[string]any{"ns": true, "key": "k", "value": 1}), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		{name: "unknown input field", body: operation(createActionOp, map[string]any{"id": uuid.NewString(), "input": map[string]any{"name": "x", "kind": "agent.echo", "colour": "red"}}), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		{name: "missing argument", body: operation(`mutation { ledger { putValue(namespace: "ns", value: 1) { key } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", field: "key", status: http.StatusOK},
		{name: "parse error", body: operation(`{ ledger { `, nil), code: "GRAPHQL_PARSE_FAILED", status: http.StatusOK},
		{name: "no operation", body: operation(``, nil), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		// Request bodies.
		{name: "malformed JSON body", body: []byte(`{"query": "{ ledger { events { nodes { id } } } }"`), code: "BAD_USER_INPUT", status: http.StatusBadRequest},
		{name: "JSON body of the wrong shape", body: []byte(`["{ ledger { events { nodes { id } } } }"]`), code: "BAD_USER_INPUT", status: http.StatusBadRequest},
		{name: "query of the wrong type", body: []byte(`{"query": 12}`), code: "BAD_USER_INPUT", status: http.StatusBadRequest},
		{name: "body that is not JSON", body: []byte("query { ledger { events { nodes { id } } } }"), code: "BAD_USER_INPUT", status: http.StatusBadRequest},
		{name: "body over 4 MiB", body: putBody("ns", "k", strings.Repeat("x", server.MaxBodyBytes)), code: "PAYLOAD_TOO_LARGE", status: http.StatusRequestEntityTooLarge},
		{name: "bad persisted-query extension", body: []byte(`{"query": "{ ledger { events { nodes { id } } } }", "extensions": {"persistedQuery": 5}}`), code: "BAD_USER_INPUT"},
		// Literals gqlparser cannot convert (it used to panic on them inside JSON arguments).
		{name: "integer literal beyond int64 in a JSON argument", body: operation(`mutation { ledger { putValue(namespace: "ns", key: "k", value: {a: [99999999999999999999999]}) { key } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		{name: "float literal beyond float64 in a JSON argument", body: operation(`mutation { ledger { putValue(namespace: "ns", key: "k", value: 1e1000000) { key } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		{name: "float literal beyond float64 in a default value", body: operation(`mutation($v: JSON = 1e999999) { ledger { putValue(namespace: "ns", key: "k", value: $v) { key } } }`, nil), code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusOK},
		{name: "number beyond jsonb's range in a variable", body: putBody("ns", "k", json.RawMessage(`1e1000000`)), code: "INVALID_JSON", field: "value"},
		// Limits on the shape of an operation.
		{name: "nested deeper than the limit", body: operation(deepQuery(server.MaxDepth+2), nil), code: "DEPTH_LIMIT_EXCEEDED"},
		{name: "complexity over the limit", body: operation(aliasedEvents(120), nil), code: "COMPLEXITY_LIMIT_EXCEEDED"},
		{name: "first 0", body: operation(`{ ledger { events(first: 0) { nodes { id } } } }`, nil), code: "BAD_USER_INPUT", field: "first"},
		{name: "first 100000", body: operation(`{ ledger { events(first: 100000) { nodes { id } } } }`, nil), code: "BAD_USER_INPUT", field: "first"},
		{name: "first -1 on values", body: operation(`{ ledger { values(namespace: "seen", first: -1) { nodes { key } } } }`, nil), code: "BAD_USER_INPUT", field: "first"},
		{name: "garbage after cursor", body: operation(`{ ledger { events(after: "!!garbage!!") { nodes { id } } } }`, nil), code: "BAD_USER_INPUT", field: "after"},
		{name: "cursor of another connection", body: operation(`query($c: String) { ledger { events(after: $c) { nodes { id } } } }`, map[string]any{"c": valuesCursor}), code: "BAD_USER_INPUT", field: "after"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.ledgerRows(t)
			r := e.doRaw(t, tc.body)
			want := tc.status
			if want == 0 {
				want = http.StatusOK
			}
			require.Equal(t, want, r.Status, "errors: %+v", r.Errors)
			requireError(t, r, tc.code, tc.field)
			require.Equal(t, before, e.ledgerRows(t), "nothing is written")
			e.requireAlive(t)
		})
	}
	require.NotContains(t, e.logs.String(), "internal error", "no bad input is an internal error")

	// The limits refuse only what is over them.
	e.ok(t, deepQuery(server.MaxDepth), nil, nil)
	e.ok(t, aliasedEvents(99), nil, nil) // 99 × 500 × (2 leaves + nodes + 1) + ledger = 198,001
	e.ok(t, `{ ledger { events(first: 500) { nodes { id } } } }`, nil, nil)
}

// ledgerRows counts what ledger writes leave behind.
func (e *env) ledgerRows(t testing.TB) [3]int {
	return [3]int{
		e.countRows(t, `SELECT count(*) FROM events`),
		e.countRows(t, `SELECT count(*) FROM kv_values`),
		e.countRows(t, `SELECT count(*) FROM idempotency_keys`),
	}
}

// valuesCursor returns an endCursor of ledger.values (a cursor of another kind than events').
func (e *env) valuesCursor(t testing.TB) string {
	var out struct {
		Ledger struct {
			Values struct{ PageInfo struct{ EndCursor string } }
		}
	}
	e.ok(t, `{ ledger { values(namespace: "seen") { pageInfo { endCursor } } } }`, nil, &out)
	require.NotEmpty(t, out.Ledger.Values.PageInfo.EndCursor)
	return out.Ledger.Values.PageInfo.EndCursor
}

// TestTextThatIsNotUTF8 pins down what happens to text that is not valid
// Unicode (HARD-PARTS 7). The rule: it is refused with BAD_USER_INPUT
// naming the part of the request that holds it, and nothing is written.
// Decoding would turn an unpaired surrogate escape ("\ud800") or an invalid
// UTF-8 byte into U+FFFD, so "k\ud800" and "k\udfff" would be one key.
func TestTextThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	for name, tc := range map[string]struct{ body, field string }{
		"lone surrogate in a variable": {`{"query": ` + gqlString(putValueOp) + `, "variables": {"ns": "sur", "key": "k\ud800", "value": {}}}`, "variables.key"},
		"low surrogate alone":          {`{"query": ` + gqlString(putValueOp) + `, "variables": {"ns": "sur", "key": "k\udfff", "value": {}}}`, "variables.key"},
		"lone surrogate in a JSON key": {`{"query": ` + gqlString(putValueOp) + `, "variables": {"ns": "sur", "key": "k", "value": {"\ud83d": 1}}}`, "variables.value"},
		"high then not low":            {`{"query": ` + gqlString(putValueOp) + `, "variables": {"ns": "sur", "key": "k", "value": {"s": "\ud83d\u0041"}}}`, "variables.value"},
		"invalid UTF-8 bytes":          {`{"query": ` + gqlString(putValueOp) + `, "variables": {"ns": "utf", "key": "k` + "\xff" + `", "value": {}}}`, "variables.key"},
		"lone surrogate in a literal":  {`{"query": ` + gqlString(`mutation { ledger { putValue(namespace: "sur", key: "lit\ud800", value: {}) { key } } }`) + `}`, "query"},
		"invalid UTF-8 in the query":   {`{"query": "{ ledger { value(namespace: \"a` + "\xfe" + `\", key: \"k\") { key } } }"}`, "query"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.doRaw(t, []byte(tc.body))
			require.Equal(t, http.StatusBadRequest, r.Status)
			requireError(t, r, "BAD_USER_INPUT", tc.field)
		})
	}
	t.Run("nothing was written", func(t *testing.T) {
		var out struct {
			Ledger struct {
				Values struct{ Nodes []kv }
			}
		}
		for _, ns := range []string{"sur", "utf"} {
			e.ok(t, `query($ns: String!) { ledger { values(namespace: $ns) { nodes { key } } } }`, map[string]any{"ns": ns}, &out)
			require.Empty(t, out.Ledger.Values.Nodes, ns)
		}
	})
	t.Run("paired surrogates, U+FFFD itself and escaped backslashes pass", func(t *testing.T) {
		body := []byte(`{"query": ` + gqlString(putValueOp) + `, "variables": {"ns": "ok", "key": "k\ud83d\ude00\ufffd", "value": {"s": "\\ud800", "t": "\uD83D\uDE00"}}}`)
		r := e.doRaw(t, body)
		require.Empty(t, r.Errors)
		var out struct{ Ledger struct{ PutValue kv } }
		require.NoError(t, json.Unmarshal(r.Data, &out))
		require.Equal(t, "k\U0001F600\uFFFD", out.Ledger.PutValue.Key)
		jsonEq(t, `{"s": "\\ud800", "t": "😀"}`, out.Ledger.PutValue.Value)
		var lit struct{ Ledger struct{ PutValue kv } }
		e.ok(t, `mutation { ledger { putValue(namespace: "ok", key: "lit\ud83d\ude00", value: {s: """\ud800"""}) { key value } } } # \ud800`, nil, &lit)
		require.Equal(t, "lit\U0001F600", lit.Ledger.PutValue.Key)
		jsonEq(t, `{"s": "\\ud800"}`, lit.Ledger.PutValue.Value)
	})
	t.Run("invalid UTF-8 in a GET query string", func(t *testing.T) {
		actionID := e.createMonitor(t)
		for q, field := range map[string]string{
			"{ ledger { value(namespace: \"utf\", key: \"k\xff\") { key } } }":                  "key",
			"{ ledger { events(type: \"a\xff\") { nodes { id } } } }":                           "type",
			"{ ledger { values(namespace: \"\xfe\") { nodes { key } } } }":                      "namespace",
			"{ actions { action(id: \"" + actionID + "\") { session(id: \"\xff\") { id } } } }": "id",
		} {
			resp, err := e.srv.Client().Get(e.srv.URL + "/graphql?query=" + url.QueryEscape(q))
			require.NoError(t, err)
			var r response
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
			resp.Body.Close()
			requireError(t, r, "BAD_USER_INPUT", field)
		}
	})
	e.requireAlive(t)
	require.NotContains(t, e.logs.String(), "internal error")
}

// TestCloseSessionErrors: closing an unknown session, a closed one, or
// without a reason fails with its code and writes nothing (I3, T8).
func TestCloseSessionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	actionID := e.createMonitor(t)
	acct := uuid.NewString()
	e.put(t, "account", acct, map[string]any{"account_id": acct}, "")
	poll(t, "the session", func() bool {
		var out struct {
			Actions struct {
				Action struct{ Session *struct{ ID string } }
			}
		}
		e.ok(t, `query($a: UUID!, $id: String!) { actions { action(id: $a) { session(id: $id) { id } } } }`,
			map[string]any{"a": actionID, "id": acct}, &out)
		return out.Actions.Action.Session != nil
	})
	const closeOp = `mutation($a: UUID!, $id: String!, $reason: String!) { actions {
	    closeSession(actionId: $a, id: $id, reason: $reason) { status } } }`
	closeVars := func(a, id, reason string) map[string]any { return map[string]any{"a": a, "id": id, "reason": reason} }
	status := func() string {
		var s string
		require.NoError(t, e.app.Pool.QueryRow(t.Context(), `SELECT status FROM sessions WHERE id = $1`, acct).Scan(&s))
		return s
	}
	for _, tc := range []struct {
		name        string
		vars        map[string]any
		code, field string
	}{
		{"unknown session", closeVars(actionID, "nobody", "r"), "NOT_FOUND", "id"},
		{"unknown action", closeVars(uuid.NewString(), acct, "r"), "NOT_FOUND", "actionId"},
		{"empty reason", closeVars(actionID, acct, ""), "BAD_USER_INPUT", "reason"},
		{"blank reason", closeVars(actionID, acct, " \t"), "BAD_USER_INPUT", "reason"},
		{"NUL in the reason", closeVars(actionID, acct, "a\x00b"), "BAD_USER_INPUT", "reason"},
		{"reason too long", closeVars(actionID, acct, strings.Repeat("r", 1001)), "BAD_USER_INPUT", "reason"},
		{"bad action id", closeVars("nope", acct, "r"), "BAD_USER_INPUT", "actionId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, e.do(t, closeOp, tc.vars), tc.code, tc.field)
			require.Equal(t, "OPEN", status())
		})
	}
	e.ok(t, closeOp, closeVars(actionID, acct, "done"), nil)
	require.Equal(t, "CANCELLED", status())
	r := e.do(t, closeOp, closeVars(actionID, acct, "again"))
	requireError(t, r, "SESSION_CLOSED", "id")
	var reason string
	require.NoError(t, e.app.Pool.QueryRow(t.Context(), `SELECT reason FROM sessions WHERE id = $1`, acct).Scan(&reason))
	require.Equal(t, "done", reason, "the second close changes nothing")
	e.requireAlive(t)
}

// A subscription selects one stream: the same field twice under two
// aliases is refused as a validation error, over SSE and WebSocket, not
// failed as an internal error once the stream starts (issue 14's review of
// bad input).
func TestSubscriptionSelectsOneField(t *testing.T) {
	t.Parallel()
	e := newLiveEnv(t, server.Config{})
	const twice = `subscription { a: ledgerEvents { position } b: ledgerEvents { position } }`
	s := sse(t, e.srv.URL, "", twice, nil)
	m := s.next(t)
	var r response
	require.NoError(t, json.Unmarshal(m.Payload, &r), "%s", m.Payload)
	ge := requireError(t, r, "GRAPHQL_VALIDATION_FAILED", "")
	require.Contains(t, ge.Message, "exactly one field")
	s.close()

	ws, _, err := dialWS(t, e.srv.URL, nil, nil)
	require.NoError(t, err)
	ws.acked(t)
	ws.subscribe(t, "1", twice, nil)
	m = ws.recv(t)
	require.Equal(t, "error", m.Type, "graphql-transport-ws answers an invalid operation with error")
	var errs []gqlError
	require.NoError(t, json.Unmarshal(m.Payload, &errs))
	requireError(t, response{Errors: errs}, "GRAPHQL_VALIDATION_FAILED", "")
	e.requireAlive(t)
}

// A number variable that does not convert to an Int or a Float is named,
// and the message says what an Int or a Float takes (gqlparser's own shows
// the zero of the failed conversion).
func TestNumberVariablesThatDoNotConvert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, v := range []any{1.5, json.Number("1e20")} {
		r := e.do(t, `query($f: Int) { ledger { events(first: $f) { nodes { id } } } }`, map[string]any{"f": v})
		ge := requireError(t, r, "GRAPHQL_VALIDATION_FAILED", "variables.f")
		require.Equal(t, "variable f: an Int takes a whole number within 32 bits", ge.Message, "%v", v)
	}
}
