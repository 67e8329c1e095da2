package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/mcp"
)

// mcpRoutes serves MCP (issue 17) at /mcp and /mcp/actions/{id} on mux.
// With authn (AUTH=on) every request needs a bearer token, the same as
// /graphql: without a valid one the answer is HTTP 401 with
// WWW-Authenticate and a JSON-RPC error MCP clients show; nil authn leaves
// the principal the surrounding handler set (the dev principal).
func (a *App) mcpRoutes(mux *http.ServeMux, authn authenticator) {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request waiting for its answer stops when the server shuts down
		// (Shutdown does not end it), telling its client to call again.
		if done, ok := r.Context().Value(shutdownKey{}).(context.Context); ok {
			r = r.WithContext(mcp.WithStopping(r.Context(), done.Done()))
		}
		a.MCP.ServeHTTP(w, r)
	})
	if authn != nil {
		h = authenticateMCP(authn, h)
	}
	mux.Handle("/mcp", h)
	mux.Handle("/mcp/", h)
}

// authenticateMCP is Authenticate for the MCP endpoint: the same tokens,
// refusals written as JSON-RPC errors (mcp.WriteError).
func authenticateMCP(authn authenticator, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, fail := authn(r.Context(), r.Header.Get("Authorization"))
		if fail != nil {
			if fail.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="actionsledger"`)
			}
			if n, ok := w.(codeNoter); ok {
				n.noteCode(fail.code)
			}
			mcp.WriteError(w, fail.status, fail.code, fail.message)
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), p)))
	})
}

// tokenAuthenticator checks bearer tokens against store and the admin token.
func tokenAuthenticator(store *auth.Store, adminToken string, log *slog.Logger) authenticator {
	var adminHash []byte
	if adminToken != "" {
		adminHash = auth.Hash(adminToken)
	}
	return func(ctx context.Context, header string) (auth.Principal, *authFailure) {
		return principalFor(ctx, store, adminHash, log, header)
	}
}
