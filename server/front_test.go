package server_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/console"
	"github.com/actionsledger/actionsledger/server"
)

// getPath fetches path without following redirects and returns its
// status, Location and body.
func (e *env) getPath(t *testing.T, path string) (int, string, string) {
	t.Helper()
	c := *e.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(e.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// GraphQL hardening (issue 6): introspection and the GraphiQL page are on
// by default and really off when turned off.
func TestIntrospectionAndGraphiQLSwitches(t *testing.T) {
	t.Parallel()
	queries := []string{
		`{ __schema { queryType { name } } }`,
		`{ __type(name: "Action") { name } }`,
		`query { ...F } fragment F on Query { __schema { types { name } } }`,
		`{ ... on Query { __type(name: "Event") { fields { name } } } }`,
	}

	on := newSteppedEnv(t, server.Config{})
	for _, q := range queries {
		on.ok(t, q, nil, nil)
	}
	status, location, _ := on.getPath(t, "/")
	require.Equal(t, http.StatusFound, status, "/ redirects to the console")
	require.Equal(t, "/console/", location)
	status, _, body := on.getPath(t, "/graphiql")
	if console.Built(console.GraphiQL()) {
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, "graphiql")
	} else { // on, but built by go test alone, without the web assets
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Contains(t, body, "assets not built: run make build")
	}

	off := newSteppedEnv(t, server.Config{DisableIntrospection: true, DisableGraphiQL: true})
	for _, q := range queries {
		r := off.do(t, q, nil)
		requireError(t, r, "INTROSPECTION_DISABLED", "")
		require.Contains(t, []string{"", "null"}, string(r.Data), "no data for %s", q)
	}
	var tn struct {
		Typename string `json:"__typename"`
	}
	off.ok(t, `{ __typename }`, nil, &tn)
	require.Equal(t, "Query", tn.Typename, "__typename is not introspection")
	off.ok(t, `{ actions { actions(first: 1) { nodes { id } } } }`, nil, nil)
	status, _, body = off.getPath(t, "/graphiql")
	require.Equal(t, http.StatusNotFound, status)
	require.NotContains(t, body, "graphiql")
}
