package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// auditScript runs graphql-http's server audits against the URL in argv[2]
// and prints one JSON line: counts by status and every audit that was not ok.
const auditScript = `import { serverAudits } from "graphql-http";
const counts = {}, notOk = [];
for (const a of serverAudits({ url: process.argv[2], fetchFn: fetch })) {
  const r = await a.fn();
  counts[r.status] = (counts[r.status] || 0) + 1;
  if (r.status !== "ok") notOk.push(a.id + " " + r.status + ": " + a.name + ": " + r.reason);
}
console.log(JSON.stringify({ counts, notOk }));
`

// auditDir returns a directory with graphql-http installed, installing it
// with npm on first use: GQLHTTP_AUDIT_DIR, or a folder of the user's cache
// directory. It skips the test when node or npm is missing.
func auditDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the GraphQL-over-HTTP audit needs %s on PATH (npm package graphql-http); %s is missing", tool, tool)
		}
	}
	dir := os.Getenv("GQLHTTP_AUDIT_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		require.NoError(t, err)
		dir = filepath.Join(cache, "actionsledger", "gqlhttp-audit")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphql-http", "package.json")); err != nil {
		if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"gqlhttp-audit","private":true,"type":"module"}`), 0o644))
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent", "graphql-http@1", "graphql@16")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm install graphql-http in %s: %s", dir, out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "audit.mjs"), []byte(auditScript), 0o644))
	return dir
}

// Issue 12 (GraphQL over HTTP by the spec): graphql-http's server audit,
// run by node against a real listener, passes with no warning and no
// notice; and clients that POST application/json keep getting HTTP 200
// with extensions.code on parse, validation and variable errors, while
// application/graphql-response+json gets HTTP 400 and no data entry.
func TestIssue12GraphQLOverHTTPAudit(t *testing.T) {
	t.Parallel()
	dir := auditDir(t)
	s := serve(t, server.Config{}, nil)

	cmd := exec.Command("node", "audit.mjs", s.base+"/graphql")
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "node audit.mjs: %s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res struct {
		Counts map[string]int
		NotOk  []string
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res), "audit output: %s", out)
	require.Empty(t, res.NotOk, "audits not ok")
	require.Greater(t, res.Counts["ok"], 50, "the audit ran: %v", res.Counts)
	t.Logf("graphql-http audit: %v", res.Counts)

	cases := []struct {
		name, body, code string // code: the first error's
	}{
		{"parse", `{"query":"{"}`, "GRAPHQL_PARSE_FAILED"},
		{"validation", `{"query":"{ nope }"}`, "GRAPHQL_VALIDATION_FAILED"},
		{"variables", `{"query":"query($n: Int!) { __typename }","variables":{"n":"x"}}`, "GRAPHQL_VALIDATION_FAILED"},
	}
	for _, c := range cases {
		for accept, status := range map[string]int{"": http.StatusOK, "application/json": http.StatusOK, "application/graphql-response+json": http.StatusBadRequest} {
			hdr := map[string]string{}
			if accept != "" {
				hdr["Accept"] = accept
			}
			st, h, r := s.send(t, http.MethodPost, "/graphql", []byte(c.body), hdr)
			require.Equal(t, status, st, "%s with Accept %q", c.name, accept)
			want := accept
			if want == "" {
				want = "application/json"
			}
			require.Equal(t, want, h.Get("Content-Type"), c.name)
			require.Nil(t, r.Data, "%s: a request that did not run has no data entry", c.name)
			require.NotEmpty(t, r.Errors, c.name)
			requireCodes(t, r)
			require.Equal(t, c.code, r.Errors[0].code(), c.name)
		}
	}
	// A body without a query (nor a persisted query's hash) is not a
	// GraphQL request: HTTP 400, BAD_USER_INPUT.
	st, _, r := s.send(t, http.MethodPost, "/graphql", []byte(`{"qeury":"{ __typename }"}`), nil)
	require.Equal(t, http.StatusBadRequest, st)
	requireError(t, r, "BAD_USER_INPUT", "")
	// An executed operation keeps its data under both media types.
	for _, accept := range []string{"application/json", "application/graphql-response+json"} {
		st, _, r := s.send(t, http.MethodPost, "/graphql", []byte(`{"query":"{ __typename }"}`), map[string]string{"Accept": accept})
		require.Equal(t, http.StatusOK, st)
		require.JSONEq(t, `{"__typename":"Query"}`, string(r.Data))
	}
}
