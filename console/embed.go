// Package console holds the web front ends the binary serves, built from
// the npm project in this folder (package.json, Vite, React) into dist/ by
// `make build`, and embedded here: GraphiQL (issue 12), built from
// graphiql/ into dist/graphiql, and the console (issue 13), built from
// app/ into dist/console.
//
// dist/ holds only a placeholder (.keep) in git, so the package compiles
// before npm has run; a front end whose index.html is missing was not
// built, and Built says so.
package console

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// GraphiQL returns the built GraphiQL page: index.html at the root and the
// files it loads under assets/, whose names carry a hash of their content.
// Without a build the returned FS is empty (see Built).
func GraphiQL() fs.FS {
	sub, _ := fs.Sub(dist, "dist/graphiql") // fails only for an invalid path; this one is valid
	return sub
}

// Console returns the built web console: index.html at the root and the
// files it loads under assets/, whose names carry a hash of their content.
// Without a build the returned FS is empty (see Built).
func Console() fs.FS {
	sub, _ := fs.Sub(dist, "dist/console") // fails only for an invalid path; this one is valid
	return sub
}

// Built reports whether app (an FS such as GraphiQL returns) holds a built
// front end, that is an index.html.
func Built(app fs.FS) bool {
	_, err := fs.Stat(app, "index.html")
	return err == nil
}
