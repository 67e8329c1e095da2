package mcp

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Every error the endpoint writes carries our code (issue 10 item 10), also
// those the SDK writes itself: its transport answers refusals (a method
// other than POST, a wrong Content-Type or Accept, a body that is not
// JSON-RPC, an unknown method) with plain-text http.Error bodies, and its
// session answers some JSON-RPC errors (parameters that do not decode)
// without data. withCodes rewrites both on their way out: a plain-text
// refusal becomes a JSON-RPC error response with the same HTTP status and
// message and the code of the status; a JSON-RPC error without a code in
// its data gets the code of its JSON-RPC code.

// statusCodes gives the code of an HTTP refusal the SDK writes.
var statusCodes = map[int]string{
	http.StatusBadRequest:            fault.BadInput,
	http.StatusForbidden:             fault.Forbidden,
	http.StatusNotFound:              fault.NotFound,
	http.StatusMethodNotAllowed:      fault.MethodNotAllowed,
	http.StatusConflict:              fault.BadInput,
	http.StatusRequestEntityTooLarge: fault.PayloadTooLarge,
	http.StatusUnsupportedMediaType:  fault.BadInput,
	http.StatusServiceUnavailable:    fault.Unavailable,
}

// rpcErrorCodes gives the code of a JSON-RPC error the SDK returns.
var rpcErrorCodes = map[int64]string{
	jsonrpc.CodeParseError:               fault.BadInput,
	jsonrpc.CodeInvalidRequest:           fault.BadInput,
	jsonrpc.CodeMethodNotFound:           fault.NotFound,
	jsonrpc.CodeInvalidParams:            fault.BadInput,
	gomcp.CodeHeaderMismatch:             fault.BadInput,
	gomcp.CodeUnsupportedProtocolVersion: fault.BadInput,
}

// maxPlainError bounds the text of a plain-text refusal kept as message.
const maxPlainError = 1 << 10

// withCodes serves h with every error response it writes given a code.
func withCodes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &codedWriter{w: w}
		h.ServeHTTP(cw, r)
		cw.finish()
	})
}

// How a codedWriter handles the body after WriteHeader.
const (
	passBody  = iota // written as it comes
	plainBody        // a plain-text refusal: kept, then replaced
	jsonBody         // one JSON-RPC message (or batch): kept, then rewritten
	eventBody        // server-sent events: each rewritten as it completes
)

type codedWriter struct {
	w      http.ResponseWriter
	status int
	mode   int
	buf    bytes.Buffer
}

func (c *codedWriter) Header() http.Header { return c.w.Header() }

// Unwrap gives http.ResponseController the writer underneath.
func (c *codedWriter) Unwrap() http.ResponseWriter { return c.w }

func (c *codedWriter) WriteHeader(status int) {
	if c.status != 0 {
		return
	}
	c.status = status
	mt, _, _ := mime.ParseMediaType(c.w.Header().Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		c.mode = eventBody
	case mt == "application/json":
		c.mode = jsonBody
	case status >= 400:
		c.mode = plainBody
	}
	if c.mode == passBody || c.mode == eventBody {
		c.w.WriteHeader(status)
	}
}

func (c *codedWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	switch c.mode {
	case plainBody:
		if room := maxPlainError - c.buf.Len(); room > 0 {
			c.buf.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	case jsonBody:
		return c.buf.Write(p)
	case eventBody:
		c.buf.Write(p)
		return len(p), c.writeEvents()
	}
	return c.w.Write(p)
}

// Flush writes what is complete and flushes it (SSE responses).
func (c *codedWriter) Flush() {
	if c.mode == eventBody {
		_ = c.writeEvents()
	}
	if c.mode == passBody || c.mode == eventBody {
		_ = http.NewResponseController(c.w).Flush()
	}
}

// writeEvents writes the complete events in the buffer, their data
// rewritten, and keeps an incomplete one.
func (c *codedWriter) writeEvents() error {
	for {
		b := c.buf.Bytes()
		end := bytes.Index(b, []byte("\n\n"))
		if end < 0 {
			return nil
		}
		event := rewriteEvent(b[:end+2])
		c.buf.Next(end + 2)
		if _, err := c.w.Write(event); err != nil {
			return err
		}
	}
}

// finish writes what was kept back.
func (c *codedWriter) finish() {
	switch c.mode {
	case plainBody:
		code, ok := statusCodes[c.status]
		if !ok {
			code = fault.Internal
		}
		msg := strings.TrimSpace(strings.ToValidUTF8(c.buf.String(), "\uFFFD"))
		if c.status == http.StatusMethodNotAllowed {
			c.w.Header().Set("Allow", "POST")
		}
		c.w.Header().Del("X-Content-Type-Options")
		writeError(c.w, c.status, code, msg)
	case jsonBody:
		c.w.Header().Del("Content-Length")
		c.w.WriteHeader(c.status)
		_, _ = c.w.Write(rewriteMessage(c.buf.Bytes()))
	case eventBody:
		_ = c.writeEvents()
		_, _ = c.w.Write(c.buf.Bytes())
	}
}

// rewriteEvent rewrites the data lines of one server-sent event (its
// bytes up to and including the blank line that ends it).
func rewriteEvent(event []byte) []byte {
	if !bytes.Contains(event, []byte(`"error"`)) {
		return event
	}
	lines := bytes.Split(event, []byte("\n"))
	for i, line := range lines {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			lines[i] = append([]byte("data: "), rewriteMessage(data)...)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

// rewriteMessage gives a JSON-RPC error response (or each of a batch)
// without a code in its data the code of its JSON-RPC code; anything else
// comes back unchanged.
func rewriteMessage(msg []byte) []byte {
	if !bytes.Contains(msg, []byte(`"error"`)) {
		return msg // a result: not decoded
	}
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return msg
		}
		changed := false
		for i, m := range batch {
			if r, ok := codeError(m); ok {
				batch[i], changed = r, true
			}
		}
		if !changed {
			return msg
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return msg
		}
		return out
	}
	if r, ok := codeError(trimmed); ok {
		return r
	}
	return msg
}

// codeError adds the code to one JSON-RPC error response lacking it.
func codeError(msg []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || m["error"] == nil {
		return nil, false
	}
	var e struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	if json.Unmarshal(m["error"], &e) != nil {
		return nil, false
	}
	var data map[string]any
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &data) != nil {
		data = map[string]any{"detail": e.Data}
	}
	if c, ok := data["code"].(string); ok && c != "" {
		return nil, false
	}
	code, ok := rpcErrorCodes[e.Code]
	if !ok {
		code = fault.Internal
	}
	if data == nil {
		data = map[string]any{}
	}
	data["code"] = code
	if fault.Retryable(code) {
		data["retryable"] = true
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, false
	}
	e.Data = raw
	if m["error"], err = json.Marshal(e); err != nil {
		return nil, false
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	return out, true
}
