package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// FuzzGraphQLBody posts arbitrary bodies to the GraphQL handler, called
// directly so that a panic escaping it fails the fuzz target. Whatever the
// body, the answer is a JSON object with data or errors, below HTTP 500,
// every error has extensions.code and none is INTERNAL, an operation a
// limit refuses returns no data, and the service logs no panic (HARD-PARTS
// 7, issue 10). The seed corpus holds real operations and the inputs of
// issue 10 (fragment bomb, deep nesting, many aliases, many mutation
// fields, the shapes that made validation quadratic); the plain `go test`
// run replays only the seeds and stays fast.
func FuzzGraphQLBody(f *testing.F) {
	e := newEnv(f)
	actionID := uuid.NewString()
	acct := uuid.NewString()
	seeds := [][]byte{
		operation(example(f, "create_monitor.graphql"), map[string]any{"id": actionID}),
		putBody("account", acct, map[string]any{"account_id": acct}),
		putBody("entry", acct+"-0", json.RawMessage(`{"account_id": "`+acct+`", "amount": 9007199254740993123}`)),
		operation(example(f, "session_query.graphql"), map[string]any{"actionId": actionID, "id": acct}),
		operation(appendEventOp, map[string]any{"type": "audit.noted", "data": []any{1, "two", nil}, "ik": "k"}),
		operation(`query($a: String) { ledger { events(first: 2, after: $a, type: "entry.inserted") {
		    nodes { id eventType data position record { ... on KVValue { namespace key value version } } }
		    pageInfo { hasNextPage endCursor } } } }`, map[string]any{"a": nil}),
		operation(`{ ledger { values(namespace: "entry", first: 1) { nodes { key value event { id } } } } }`, nil),
		operation(`mutation { actions { closeSession(actionId: "`+actionID+`", id: "`+acct+`", reason: "fuzz") { status } } }`, nil),
		operation(`{ actions { actions(first: 5) { nodes { id version definition { name triggers { name event } } } } } }`, nil),
		[]byte(`{"query": "{ __schema { types { name } } }"}`),
		[]byte(`{"query": "{ ledger { value(namespace: \"a\\u0000\", key: \"\\ud800\") { key } } }", "variables": {"x": 1e999}}`),
		[]byte(`{"query": "query { ledger { events { nodes { id } } } }", "extensions": {"persistedQuery": {"version": 1, "sha256Hash": "00"}}}`),
		[]byte(`{"query": "mutation($v: JSON!) { ledger { putValue(namespace: \"n\", key: \"k\", value: $v) { value } } }", "variables": {"v": {"a": "\u0000"}}}`),
		[]byte(`{"query": `),
		[]byte(`[]`),
		[]byte(``),
		// Issue 10: the limits' inputs, each refused with a code.
		operation(server.FragmentBomb("query", "Query", 30, "__typename"), nil),
		operation(server.FragmentBomb("mutation", "Mutation", 30, `ledger { appendEvent(type: "fuzz.bomb", data: {}) { id } }`), nil),
		operation(server.SameNameFields(3000), nil),
		operation(server.SideBySideFragments(400), nil),
		operation(server.NestedSameName(40, 40), nil),
		operation(deepQuery(server.MaxDepth+10), nil),
		operation(manyAliases(3000), nil),
		operation(mutationOp(1000, "fuzz.cap"), nil),
		operation(mutationOp(3, "fuzz.few"), nil),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	// Codes of limits that refuse an operation before any field runs.
	refusedWhole := map[string]bool{"COMPLEXITY_LIMIT_EXCEEDED": true, "DEPTH_LIMIT_EXCEEDED": true,
		"MUTATION_LIMIT_EXCEEDED": true, "METHOD_NOT_ALLOWED": true}
	h := e.app.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		mark := len(e.logs.String())
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		require.Less(t, rec.Code, 500, "body: %q\nanswer: %s", body, rec.Body)
		var r struct {
			Data   *json.RawMessage `json:"data"`
			Errors []gqlError       `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r), "answer is not a JSON object: %s", rec.Body)
		require.True(t, r.Data != nil || len(r.Errors) > 0, "answer has neither data nor errors: %s", rec.Body)
		for _, ge := range r.Errors {
			require.NotEmpty(t, ge.code(), "error without extensions.code for body %q: %+v", body, ge)
			require.NotEqual(t, "INTERNAL", ge.code(), "internal error for body %q: %+v", body, ge)
			if refusedWhole[ge.code()] && r.Data != nil {
				require.Equal(t, "null", string(*r.Data), "%s refuses the whole operation, yet data came back", ge.code())
			}
		}
		logged := e.logs.String()[mark:]
		require.False(t, strings.Contains(logged, "panic"), "the service logged a panic for body %q:\n%s", body, logged)
	})
}
