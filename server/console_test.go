package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/console"
	"github.com/actionsledger/actionsledger/server"
	"github.com/actionsledger/actionsledger/turns"
)

// noFollow fetches url without following a redirect and returns its
// status, Location and body.
func noFollow(t *testing.T, url string) (int, string, string) {
	t.Helper()
	c := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b [4096]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode, resp.Header.Get("Location"), string(b[:n])
}

// Issue 13 (console routes): every path under /console/ but its files
// answers the page (the client's router draws the screen, so deep links
// work), files under /console/assets/ are served as GraphiQL's are, / and
// /console redirect, nothing is listed, an unbuilt binary says how to
// build, and CONSOLE=false turns the routes off (/ then goes to GraphiQL).
func TestConsoleRoutes(t *testing.T) {
	t.Parallel()
	const index = `<!doctype html><div id="root"></div><script type="module" src="/console/assets/index-Zz9.js"></script>`
	built := fstest.MapFS{
		"index.html":             {Data: []byte(index)},
		"assets/index-Zz9.js":    {Data: []byte("console.log(2)")},
		"assets/index-Zz9.css":   {Data: []byte("main{}")},
		"assets/nested/inner.js": {Data: []byte("x")},
	}
	mux := func(front server.Front) *httptest.Server {
		gql := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
		srv := httptest.NewServer(server.Mux(gql, front))
		t.Cleanup(srv.Close)
		return srv
	}
	srv := mux(server.Front{Console: true, ConsoleFiles: built, GraphiQL: true, GraphiQLFiles: fstest.MapFS{}})

	t.Run("redirects", func(t *testing.T) {
		for path, want := range map[string]string{"/": "/console/", "/console": "/console/"} {
			status, loc, _ := noFollow(t, srv.URL+path)
			require.Equal(t, http.StatusFound, status, path)
			require.Equal(t, want, loc, path)
		}
	})

	t.Run("deep links answer the page", func(t *testing.T) {
		for _, path := range []string{
			"/console/",
			"/console/inbox",
			"/console/sessions/4f1c2a7e-9b3d-4e6f-8a21-5c7d9e0b1f34/3f0c9f8e",
			"/console/sessions/4f1c2a7e-9b3d-4e6f-8a21-5c7d9e0b1f34/a%2Fb/turns/2",
			"/console/sessions/4f1c2a7e-9b3d-4e6f-8a21-5c7d9e0b1f34/3f0c9f8e/interrupts/9c1d",
			"/console/no/such/screen",
		} {
			resp, body := get(t, http.MethodGet, srv.URL+path, "")
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			require.Equal(t, index, body, path)
			require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"), path)
			require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"), path)
			csp := resp.Header.Get("Content-Security-Policy")
			require.Contains(t, csp, "default-src 'self'", path)
			require.Contains(t, csp, "connect-src 'self'", path)
			require.NotContains(t, csp, "unsafe", path)
		}
	})

	t.Run("assets", func(t *testing.T) {
		for name, ct := range map[string]string{"index-Zz9.js": "text/javascript; charset=utf-8", "index-Zz9.css": "text/css; charset=utf-8"} {
			resp, body := get(t, http.MethodGet, srv.URL+"/console/assets/"+name, "")
			require.Equal(t, http.StatusOK, resp.StatusCode, name)
			require.Equal(t, string(built["assets/"+name].Data), body, name)
			require.Equal(t, ct, resp.Header.Get("Content-Type"), name)
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"), name)
		}
		for _, path := range []string{
			"/console/assets/",
			"/console/assets/nested",
			"/console/assets/nested/inner.js",
			"/console/assets/missing-1.js",
			"/console/assets/..%2findex.html",
		} {
			resp, body := get(t, http.MethodGet, srv.URL+path, "")
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			require.Contains(t, body, `"code":"NOT_FOUND"`, path)
		}
		resp, _ := get(t, http.MethodPost, srv.URL+"/console/", "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "POST /console/")
	})

	t.Run("not built", func(t *testing.T) {
		unbuilt := mux(server.Front{Console: true, ConsoleFiles: fstest.MapFS{}})
		resp, body := get(t, http.MethodGet, unbuilt.URL+"/console/sessions", "")
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Contains(t, body, "assets not built: run make build")
	})

	t.Run("off", func(t *testing.T) {
		off := mux(server.Front{GraphiQL: true, GraphiQLFiles: fstest.MapFS{}, ConsoleFiles: built})
		for _, path := range []string{"/console/", "/console/inbox", "/console/assets/index-Zz9.js"} {
			status, _, body := noFollow(t, off.URL+path)
			require.Equal(t, http.StatusNotFound, status, path)
			require.NotContains(t, body, "console.log", path)
		}
		status, loc, _ := noFollow(t, off.URL+"/")
		require.Equal(t, http.StatusFound, status)
		require.Equal(t, "/graphiql", loc, "/ goes to GraphiQL when the console is off")
		none := mux(server.Front{})
		status, _, _ = noFollow(t, none.URL+"/")
		require.Equal(t, http.StatusNotFound, status, "/ with neither front end")
	})
}

// consoleAdmin is the ADMIN_TOKEN of the browser test's server.
const consoleAdmin = "console-admin-token-0123456789abcdef-0123"

// Issue 13: the console in headless Chromium against the real server with
// AUTH=on: sign-in, the live inbox and badge, approving from the inbox
// while the session page follows live, a replacement input checked against
// the tool's inputSchema, retrying a held turn, closing a session, a second
// browser's decision removing the row, a responder shown only what its
// token allows, keyboard-only answering, deep links, answers shown in the
// turns that raised them, a held turn's reason, a session's clock, trigger
// diagnostics and intake records, a sessions row changing live, axe-core
// on every screen at 1280 and 390 px, and no request to any other origin
// (console/tests/console.page.mjs, which sets up a scripted agent with a
// gated tool through the API). The browser's clock is set from liveStart
// (SERVER_TIME). With CONSOLE_SCREENSHOTS set to a folder (make
// screenshots), it leaves PNGs of every screen there.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	_, err := os.Stat(chromium)
	requireWeb(t, err == nil, chromium+" is missing: apt-get install chromium (.ci/run does)")
	node, err := exec.LookPath("node")
	requireWeb(t, err == nil, "node is missing: install Node.js and npm (see README)")
	requireWeb(t, console.Built(console.Console()), "the console's assets are not built into this test binary: run make build (or make test)")
	web := filepath.Join("..", "console")
	_, err = os.Stat(filepath.Join(web, "node_modules", "playwright-core"))
	requireWeb(t, err == nil, "console/node_modules has no playwright-core: run make build (npm ci)")

	// The scripted model is priced (G8), far below what the page's spend
	// cap could reach.
	e := newLiveEnv(t, server.Config{Auth: true, AdminToken: consoleAdmin,
		Prices: turns.Prices{"scripted/*": {InputPerMTok: 0.001, OutputPerMTok: 0.001}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{filepath.Join("tests", "console.page.mjs"), e.srv.URL}
	if dir := os.Getenv("CONSOLE_SCREENSHOTS"); dir != "" {
		args = append(args, dir)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium, "ADMIN_TOKEN="+consoleAdmin, "SERVER_TIME="+liveStart.Format(time.RFC3339))
	out, err := cmd.CombinedOutput()
	t.Logf("console/tests/console.page.mjs:\n%s", out)
	require.NoError(t, err, "the page test failed (its output is above)")
}
