package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Media types of a GraphQL response (GraphQL over HTTP).
const (
	mediaJSON            = "application/json"
	mediaGraphQLResponse = "application/graphql-response+json"
)

// overHTTP makes a gqlgen GET or POST transport answer as the GraphQL over
// HTTP specification asks (issue 12). gqlgen already picks the response's
// media type from Accept (application/graphql-response+json when the client
// asks for it, application/json when it asks for that, for anything, or
// nothing); what it gets wrong is a request refused before it runs (a
// document that does not parse or validate, variables that do not coerce,
// and our own refusals such as COMPLEXITY_LIMIT_EXCEEDED):
//
//   - under application/json it is answered HTTP 200 (gqlgen: 422), since
//     that media type's status says only whether the request was a
//     well-formed GraphQL-over-HTTP request;
//   - under application/graphql-response+json it is answered HTTP 400;
//   - under either, the body has no data entry (gqlgen writes "data":null),
//     which tells a client the request was not executed.
//
// A status other than 200, 400 and 422 that a wrapped transport chose (405
// for a mutation over GET) is kept, and extensions.code is never changed.
// Executed operations are left to gqlgen: HTTP 200 with data.
type overHTTP struct{ graphql.Transport }

func (t overHTTP) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	o := &notExecuted{GraphExecutor: exec}
	t.Transport.Do(&specWriter{ResponseWriter: w, o: o}, r, o)
}

// notExecuted records a request that was refused before it ran, and the
// response gqlgen built for it.
type notExecuted struct {
	graphql.GraphExecutor
	refused bool
	resp    *graphql.Response
}

func (e *notExecuted) CreateOperationContext(ctx context.Context, p *graphql.RawParams) (*graphql.OperationContext, gqlerror.List) {
	oc, errs := e.GraphExecutor.CreateOperationContext(ctx, p)
	if len(errs) > 0 {
		e.refused = true
		noteRefusedOperation(ctx, p)
	}
	return oc, errs
}

func (e *notExecuted) DispatchError(ctx context.Context, list gqlerror.List) *graphql.Response {
	resp := e.GraphExecutor.DispatchError(ctx, list)
	e.refused, e.resp = true, resp
	return resp
}

// specWriter rewrites the status and body of a refused request (see
// overHTTP); anything else passes through.
type specWriter struct {
	http.ResponseWriter
	o *notExecuted
}

func (w *specWriter) WriteHeader(code int) {
	if w.o.refused {
		switch code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnprocessableEntity:
			code = http.StatusOK
			if w.graphQLResponse() {
				code = http.StatusBadRequest
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *specWriter) Write(b []byte) (int, error) {
	if !w.o.refused || w.o.resp == nil {
		return w.ResponseWriter.Write(b)
	}
	// gqlgen writes a refusal's response in one Write: answer it without
	// its data entry.
	out, err := json.Marshal(struct {
		Errors     gqlerror.List  `json:"errors"`
		Extensions map[string]any `json:"extensions,omitempty"`
	}{w.o.resp.Errors, w.o.resp.Extensions})
	if err != nil {
		return w.ResponseWriter.Write(b)
	}
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// graphQLResponse reports whether the response is
// application/graphql-response+json (gqlgen set the header before it writes).
func (w *specWriter) graphQLResponse() bool {
	ct := w.Header().Get("Content-Type")
	return strings.HasPrefix(ct, mediaGraphQLResponse)
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *specWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
