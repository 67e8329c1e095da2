package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/console"
	"github.com/actionsledger/actionsledger/server"
)

// get fetches url with method (and If-None-Match when etag is set) and
// returns the response with its body read.
func get(t *testing.T, method, url, etag string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// graphiqlMux serves the routes with files as GraphiQL's build (on), and
// a /graphql that answers 204.
func graphiqlMux(t *testing.T, on bool, files fstest.MapFS) *httptest.Server {
	t.Helper()
	gql := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewServer(server.Mux(gql, server.Front{GraphiQL: on, GraphiQLFiles: files}))
	t.Cleanup(srv.Close)
	return srv
}

// Issue 12 (GraphiQL): the page and its files are served with the right
// content types and caching, nothing is listed or reachable outside
// assets/, an unbuilt binary says how to build the assets, and GRAPHIQL=false
// turns every route off.
func TestGraphiQLRoutes(t *testing.T) {
	t.Parallel()
	const index = `<!doctype html><script type="module" src="/graphiql/assets/index-AbC123.js"></script>`
	built := fstest.MapFS{
		"index.html":                  {Data: []byte(index)},
		"assets/index-AbC123.js":      {Data: []byte("console.log(1)")},
		"assets/index-AbC123.css":     {Data: []byte("body{}")},
		"assets/codicon-XyZ.ttf":      {Data: []byte("\x00\x01\x00\x00")},
		"assets/editor.worker-Q1.js":  {Data: []byte("self.onmessage=null")},
		"assets/nested/deeper-Q2.js":  {Data: []byte("x")},
		"assets/strange.unknownext42": {Data: []byte("?")},
	}
	srv := graphiqlMux(t, true, built)

	t.Run("page", func(t *testing.T) {
		var etag string
		for _, path := range []string{"/graphiql", "/graphiql/", "/"} {
			resp, body := get(t, http.MethodGet, srv.URL+path, "")
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			require.Equal(t, index, body, path)
			require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"), path)
			require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"), path)
			require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
			etag = resp.Header.Get("ETag")
			require.NotEmpty(t, etag, path)
		}
		resp, body := get(t, http.MethodGet, srv.URL+"/graphiql", etag)
		require.Equal(t, http.StatusNotModified, resp.StatusCode)
		require.Empty(t, body)
	})

	t.Run("assets", func(t *testing.T) {
		for name, ct := range map[string]string{
			"index-AbC123.js":      "text/javascript; charset=utf-8",
			"editor.worker-Q1.js":  "text/javascript; charset=utf-8",
			"index-AbC123.css":     "text/css; charset=utf-8",
			"codicon-XyZ.ttf":      "font/ttf",
			"strange.unknownext42": "application/octet-stream",
		} {
			resp, body := get(t, http.MethodGet, srv.URL+"/graphiql/assets/"+name, "")
			require.Equal(t, http.StatusOK, resp.StatusCode, name)
			require.Equal(t, string(built["assets/"+name].Data), body, name)
			require.Equal(t, ct, resp.Header.Get("Content-Type"), name)
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"), name)
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), name)
		}
		resp, body := get(t, http.MethodHead, srv.URL+"/graphiql/assets/index-AbC123.js", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Empty(t, body)
	})

	t.Run("nothing else", func(t *testing.T) {
		for _, path := range []string{
			"/graphiql/assets/",                    // no listing
			"/graphiql/assets/nested",              // a folder
			"/graphiql/assets/nested/deeper-Q2.js", // only files directly under assets/
			"/graphiql/assets/missing-1.js",
			"/graphiql/assets/..%2findex.html",
			"/graphiql/assets/%2e%2e",
			"/graphiql/index.html",
			"/graphiql/x",
		} {
			resp, body := get(t, http.MethodGet, srv.URL+path, "")
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			require.Contains(t, body, `"code":"NOT_FOUND"`, path)
			require.NotContains(t, body, "deeper", path)
		}
		resp, _ := get(t, http.MethodPost, srv.URL+"/graphiql", "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "POST /graphiql")
	})

	t.Run("not built", func(t *testing.T) {
		unbuilt := graphiqlMux(t, true, fstest.MapFS{})
		for _, path := range []string{"/graphiql", "/"} {
			resp, body := get(t, http.MethodGet, unbuilt.URL+path, "")
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
			require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"), path)
			require.Contains(t, body, "assets not built: run make build", path)
		}
	})

	t.Run("off", func(t *testing.T) {
		off := graphiqlMux(t, false, built)
		for _, path := range []string{"/graphiql", "/graphiql/", "/", "/graphiql/assets/index-AbC123.js"} {
			resp, body := get(t, http.MethodGet, off.URL+path, "")
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			require.NotContains(t, body, "console.log", path)
		}
		resp, _ := get(t, http.MethodGet, off.URL+"/graphql", "")
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "/graphql stays")
	})
}

// requireWeb skips t with why, or fails it in CI (CI set), where .ci/run
// and `make test` provide the built assets, Node.js and Chromium.
func requireWeb(t *testing.T, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: .ci/run and make test must provide it)", why)
	}
	t.Skip(why)
}

// Issue 12 (GraphiQL offline): the real server answers GET /graphiql and /
// with the embedded page, whose every src and href is a path on this
// server (no URL of another host), and each file it names is served.
func TestGraphiQLPageHasNoExternalResources(t *testing.T) {
	t.Parallel()
	requireWeb(t, console.Built(console.GraphiQL()), "GraphiQL's assets are not built into this test binary: run make build (or make test)")
	e := newSteppedEnv(t, server.Config{})
	attr := regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*["']([^"']*)["']`)
	for _, path := range []string{"/graphiql", "/"} {
		resp, body := get(t, http.MethodGet, e.srv.URL+path, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Contains(t, body, `id="graphiql"`, path)
		refs := attr.FindAllStringSubmatch(body, -1)
		require.NotEmpty(t, refs, "%s names no file", path)
		for _, m := range refs {
			ref := m[1]
			if ref == "data:," {
				continue // the empty favicon: no request at all
			}
			require.True(t, strings.HasPrefix(ref, "/") && !strings.HasPrefix(ref, "//"),
				"%s: %q is not a path on this server", path, ref)
			r, _ := get(t, http.MethodGet, e.srv.URL+ref, "")
			require.Equal(t, http.StatusOK, r.StatusCode, ref)
			require.Contains(t, []string{"text/javascript; charset=utf-8", "text/css; charset=utf-8"}, r.Header.Get("Content-Type"), ref)
		}
	}
}

// Issue 12 (GraphiQL): the page in headless Chromium against the real
// server: GraphiQL loads with the seed's operations as tabs and examples,
// runs them and shows their results, aims subscriptions at
// ws://HOST/graphql, and requests nothing from another origin
// (console/tests/graphiql.page.mjs). A screenshot lands in
// console/test-results/graphiql.png.
func TestGraphiQLInBrowser(t *testing.T) {
	t.Parallel()
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	_, err := os.Stat(chromium)
	requireWeb(t, err == nil, chromium+" is missing: apt-get install chromium (.ci/run does)")
	node, err := exec.LookPath("node")
	requireWeb(t, err == nil, "node is missing: install Node.js and npm (see docs/development.md)")
	requireWeb(t, console.Built(console.GraphiQL()), "GraphiQL's assets are not built into this test binary: run make build (or make test)")
	web := filepath.Join("..", "console")
	_, err = os.Stat(filepath.Join(web, "node_modules", "playwright-core"))
	requireWeb(t, err == nil, "console/node_modules has no playwright-core: run make build (npm ci)")

	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("tests", "graphiql.page.mjs"), e.srv.URL, filepath.Join("test-results", "graphiql.png"))
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("console/tests/graphiql.page.mjs:\n%s", out)
	require.NoError(t, err, "the page test failed (its output is above)")
}
