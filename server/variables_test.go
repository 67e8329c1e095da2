package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// TestVariablesCoerceStrictly: a variable's JSON value must have the type
// of the built-in scalar it is declared as (GraphQL input coercion): a
// number is no String (it would write the key "5"), a string no Int or
// Float. Refused before anything runs, naming the variable.
func TestVariablesCoerceStrictly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const events = `query($f: Int, $t: String) { ledger { events(first: $f, type: $t) { nodes { id } } } }`
	for name, tc := range map[string]struct {
		query string
		vars  string
		field string
	}{
		"number for String":        {putValueOp, `{"ns": "strict", "key": 5, "value": {}}`, "variables.key"},
		"fraction for String":      {putValueOp, `{"ns": "strict", "key": 1.5, "value": {}}`, "variables.key"},
		"boolean for String":       {putValueOp, `{"ns": true, "key": "k", "value": {}}`, "variables.ns"},
		"string for Int":           {events, `{"f": "10"}`, "variables.f"},
		"fraction for Int":         {events, `{"f": 2.5}`, "variables.f"},
		"number for nullable text": {events, `{"t": 7}`, "variables.t"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.doRaw(t, []byte(`{"query": `+gqlString(tc.query)+`, "variables": `+tc.vars+`}`))
			requireError(t, r, "GRAPHQL_VALIDATION_FAILED", tc.field)
			require.Empty(t, string(r.Data))
		})
	}
	t.Run("nothing was written", func(t *testing.T) {
		var out struct {
			Ledger struct{ Values struct{ Nodes []kv } }
		}
		e.ok(t, `{ ledger { values(namespace: "strict") { nodes { key } } } }`, nil, &out)
		require.Empty(t, out.Ledger.Values.Nodes)
	})
	t.Run("values of the right type pass", func(t *testing.T) {
		r := e.doRaw(t, []byte(`{"query": `+gqlString(events)+`, "variables": {"f": 10, "t": "x.y"}}`))
		require.Empty(t, r.Errors)
		r = e.doRaw(t, []byte(`{"query": `+gqlString(putValueOp)+`, "variables": {"ns": "typed", "key": "5", "value": 5}}`))
		require.Empty(t, r.Errors)
	})
}

// TestGetNeedsAQuery: GET /graphql without a query (or a persisted query's
// hash) is not a GraphQL request: HTTP 400, BAD_USER_INPUT naming query.
// A \u escape of a lone surrogate in a GET's query or variables is
// refused as in a POST body.
func TestGetNeedsAQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, tc := range map[string]struct{ params, field string }{
		"no parameters":       {"", "query"},
		"variables only":      {"variables=" + url.QueryEscape(`{"a": 1}`), "query"},
		"surrogate literal":   {"query=" + url.QueryEscape(`{ ledger { value(namespace: "a", key: "\ud800") { key } } }`), "query"},
		"surrogate variables": {"query=" + url.QueryEscape(`query($k: String!) { ledger { value(namespace: "a", key: $k) { key } } }`) + "&variables=" + url.QueryEscape(`{"k": "\udc00"}`), "variables"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := e.srv.Client().Get(e.srv.URL + "/graphql?" + tc.params)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			var r response
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
			requireError(t, r, "BAD_USER_INPUT", tc.field)
		})
	}
}

// Found by a newcomer's trial: an error quoting a megabyte-long name is cut
// (MaxErrorMessage), several operations without operationName say so, and
// a request refused before it ran has no data entry.
func TestErrorMessagesStayShortAndSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := strings.Repeat("a", 1<<20)
	r := e.do(t, "query($"+long+": Int) { __typename }", nil)
	require.NotEmpty(t, r.Errors)
	for _, err := range r.Errors {
		require.LessOrEqual(t, len(err.Message), server.MaxErrorMessage)
	}
	r = e.do(t, "query A { __typename } query B { __typename }", nil)
	requireError(t, r, "GRAPHQL_VALIDATION_FAILED", "")
	require.Contains(t, r.Errors[0].Message, "operationName")

	status, raw := e.post(t, []byte(`{}`))
	require.Equal(t, http.StatusBadRequest, status)
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &body))
	require.NotContains(t, body, "data", "%s", raw)
}
