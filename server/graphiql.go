package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/actionsledger/actionsledger/console"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// GraphiQL's routes (issue 12, GraphiQL): the page at /graphiql and the
// files it loads under /graphiql/assets/, all from assets embedded in the
// binary, so the page works with no network but the server's. / redirects
// to the console (console.go), or here when the console is off.
const (
	GraphiQLPath       = "/graphiql"
	GraphiQLAssetsPath = "/graphiql/assets/"
)

// notBuilt is the page's answer (HTTP 503) when the binary was built
// without its web assets: `go build` before `make build` ran npm.
const notBuilt = "GraphiQL is not available: assets not built: run make build (it needs Node.js and npm), then restart the server.\n"

// pagePolicy is the Content-Security-Policy of the page: everything from
// this server (scripts, workers, fonts, the API over HTTP and WebSocket),
// nothing from anywhere else. Monaco sets inline styles and GraphiQL's CSS
// inlines fonts and icons as data: URLs.
const pagePolicy = "default-src 'self'; script-src 'self'; worker-src 'self'; connect-src 'self'; " +
	"style-src 'self' 'unsafe-inline'; font-src 'self' data:; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentTypes are the types of the files Vite emits, fixed here rather
// than left to the host's MIME database, which differs between machines.
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ttf":   "font/ttf",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".wasm":  "application/wasm",
}

// webApp serves one front end built by Vite: index.html and files under
// assets/ whose names carry a hash of their content.
type webApp struct {
	files fs.FS
	// assets is the route prefix of the files, e.g. /graphiql/assets/.
	assets string
	// policy is the page's Content-Security-Policy.
	policy string
	// notBuilt is the page's answer (HTTP 503) when files has no index.html.
	notBuilt string
}

// mountGraphiQL adds GraphiQL's routes to mux: GET /graphiql (and
// /graphiql/) answer the page, GET /graphiql/assets/NAME its files. files
// is the built page; nil means the one embedded in the binary
// (console.GraphiQL).
func mountGraphiQL(mux *http.ServeMux, files fs.FS) {
	if files == nil {
		files = console.GraphiQL()
	}
	app := webApp{files: files, assets: GraphiQLAssetsPath, policy: pagePolicy, notBuilt: notBuilt}
	mux.HandleFunc("GET "+GraphiQLPath, app.page)
	mux.HandleFunc("GET "+GraphiQLPath+"/{$}", app.page)
	mux.HandleFunc("GET "+GraphiQLAssetsPath+"{name}", app.asset)
}

// page answers index.html, revalidated on every load (Cache-Control:
// no-cache, with an ETag) so that a new build is picked up at once; without
// a build it answers HTTP 503 with notBuilt.
func (a webApp) page(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(a.files, "index.html")
	if err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(a.notBuilt))
		return
	}
	sum := sha256.Sum256(b)
	h := w.Header()
	h.Set("Content-Type", contentTypes[".html"])
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", `"`+hex.EncodeToString(sum[:12])+`"`)
	h.Set("Content-Security-Policy", a.policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(b))
}

// asset answers one file under assets/, cacheable for a year (its name
// changes with its content); a missing file or a folder is HTTP 404 with
// code NOT_FOUND, and nothing is ever listed.
func (a webApp) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	notFound := func(w http.ResponseWriter) {
		writeError(w, http.StatusNotFound, fault.NotFound, "no such file: "+a.assets+name)
	}
	f, err := a.files.Open("assets/" + name)
	if err != nil {
		notFound(w)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	rs, seekable := f.(io.ReadSeeker) // embedded files are
	if err != nil || st.IsDir() || !seekable {
		notFound(w)
		return
	}
	ct, ok := contentTypes[path.Ext(name)]
	if !ok {
		ct = mime.TypeByExtension(path.Ext(name))
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, name, time.Time{}, rs)
}
