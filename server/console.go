package server

import (
	"io/fs"
	"net/http"

	"github.com/actionsledger/actionsledger/console"
)

// The console's routes (issue 13): the web console for responders and
// operators, a single-page app built into the binary (console.Console).
// Every path under /console/ but its files answers the page, whose own
// router draws the screen the path names, so a deep link (a session, a
// turn, an interrupt) can be pasted anywhere and opened.
const (
	ConsolePath       = "/console/"
	ConsoleAssetsPath = "/console/assets/"
)

// consoleNotBuilt is the console's answer (HTTP 503) when the binary was
// built without its web assets.
const consoleNotBuilt = "The console is not available: assets not built: run make build (it needs Node.js and npm), then restart the server.\n"

// consolePolicy is the console's Content-Security-Policy: scripts, styles,
// images and the API (HTTP and WebSocket) from this server only, no inline
// script or style, no frames, no form posts.
const consolePolicy = "default-src 'self'; script-src 'self'; connect-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// mountConsole adds the console's routes to mux: GET /console redirects to
// /console/, GET /console/assets/NAME answers a file of the build, and
// every other GET under /console/ the page. files is the built console;
// nil means the one embedded in the binary.
func mountConsole(mux *http.ServeMux, files fs.FS) {
	if files == nil {
		files = console.Console()
	}
	app := webApp{files: files, assets: ConsoleAssetsPath, policy: consolePolicy, notBuilt: consoleNotBuilt}
	mux.HandleFunc("GET /console", redirectTo(ConsolePath))
	mux.HandleFunc("GET "+ConsolePath+"{path...}", app.page)
	mux.HandleFunc("GET "+ConsoleAssetsPath+"{$}", app.asset) // no listing
	mux.HandleFunc("GET "+ConsoleAssetsPath+"{name}", app.asset)
	mux.HandleFunc("GET "+ConsoleAssetsPath+"{name}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		app.asset(w, r) // a path below assets/ names no file: 404, never the page
	})
}

// redirectTo answers 302 Found to path (a path on this server).
func redirectTo(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, path, http.StatusFound)
	}
}
