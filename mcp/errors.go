package mcp

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// JSON-RPC error codes of the endpoint. The standard ones are JSON-RPC's;
// the others lie in its range for server errors. Each error's data is
// {"code": <our stable code>, "retryable"?: true} (docs/errors.md).
const (
	codeInvalidRequest  = jsonrpc.CodeInvalidRequest // no such endpoint
	codeInvalidParams   = jsonrpc.CodeInvalidParams  // unknown tool
	codeInternal        = jsonrpc.CodeInternalError
	CodeUnauthenticated = -32001 // HTTP 401: no valid bearer token
	codeForbidden       = -32003 // HTTP 403
	CodeUnavailable     = -32004 // HTTP 503, or the stdio bridge losing the server: retry later
	codeTooLarge        = -32013 // HTTP 413
)

// rpcError is a JSON-RPC error carrying our code in its data.
func rpcError(rpc int64, code, format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: rpc, Message: fmt.Sprintf(format, args...), Data: errorData(code)}
}

func errorData(code string) json.RawMessage {
	d := map[string]any{"code": code}
	if fault.Retryable(code) {
		d["retryable"] = true
	}
	raw, _ := json.Marshal(d)
	return raw
}

// rpcCodes maps our codes to the JSON-RPC code an HTTP-level refusal
// carries.
var rpcCodes = map[string]int64{
	fault.Unauthenticated: CodeUnauthenticated,
	fault.Forbidden:       codeForbidden,
	fault.Unavailable:     CodeUnavailable,
	fault.Timeout:         CodeUnavailable,
	fault.PayloadTooLarge: codeTooLarge,
	fault.NotFound:        codeInvalidRequest,
	fault.Internal:        codeInternal,
}

// WriteError answers an HTTP request to the endpoint that is refused before
// MCP reads it (authentication, limits): HTTP status, and a JSON-RPC error
// response without an id whose data carries code, which MCP clients show.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	writeError(w, status, code, message)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	rpc, ok := rpcCodes[code]
	if !ok {
		rpc = codeInvalidRequest
	}
	// A response to no request has a null id (JSON-RPC 2.0, section 5).
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": rpcError(rpc, code, "%s: %s", code, message)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
