package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Error is one entry of a GraphQL answer's errors, with the extensions the
// server sets (docs/errors.md).
type Error struct {
	Message string `json:"message"`
	// Code is extensions.code, e.g. FORBIDDEN or NOT_FOUND; empty when the
	// server gave none.
	Code string `json:"code,omitempty"`
	// Field is extensions.field: the argument or input field at fault, as a
	// dotted path (e.g. input.triggers.0.event); empty when none is.
	Field string `json:"field,omitempty"`
	// Retryable is extensions.retryable: sending the same request later may
	// succeed (UNAVAILABLE, TIMEOUT).
	Retryable bool `json:"retryable,omitempty"`
	// Path is the response path of the field that failed, if any.
	Path []any `json:"path,omitempty"`
}

func (e *Error) setExtensions(ext map[string]any) {
	e.Code, _ = ext["code"].(string)
	e.Field, _ = ext["field"].(string)
	e.Retryable, _ = ext["retryable"].(bool)
}

// String is "CODE: message (field F)", leaving out what is empty.
func (e Error) String() string {
	var b strings.Builder
	if e.Code != "" {
		b.WriteString(e.Code + ": ")
	}
	b.WriteString(e.Message)
	if e.Field != "" && !strings.HasPrefix(e.Message, e.Field+":") {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	return b.String()
}

// ResponseError is a GraphQL answer with errors: the server received the
// operation and said no (or no to part of it). Errors has at least one
// entry.
type ResponseError struct {
	// HTTPStatus is the answer's HTTP status (200 for most errors, 401 for
	// UNAUTHENTICATED, 4xx for requests refused before they ran); 0 for an
	// error that arrived on a stream.
	HTTPStatus int
	Errors     []Error
}

// Error joins the errors' strings with "; ".
func (e *ResponseError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, x := range e.Errors {
		parts[i] = x.String()
	}
	return strings.Join(parts, "; ")
}

// Code returns the first non-empty extensions.code, or "".
func (e *ResponseError) Code() string {
	for _, x := range e.Errors {
		if x.Code != "" {
			return x.Code
		}
	}
	return ""
}

// Has reports whether any of the errors has code.
func (e *ResponseError) Has(code string) bool {
	for _, x := range e.Errors {
		if x.Code == code {
			return true
		}
	}
	return false
}

// TransportError means no GraphQL answer: the server could not be reached,
// the connection broke (a stream included), the context ended, or what
// answered is not a GraphQL server (say, a proxy's error page).
type TransportError struct {
	URL string
	// HTTPStatus is the status of a non-GraphQL answer; 0 when there was
	// no HTTP answer.
	HTTPStatus int
	// What says what went wrong when Err does not.
	What string
	Err  error
}

func (e *TransportError) Error() string {
	var b strings.Builder
	b.WriteString(e.URL)
	if e.HTTPStatus != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.HTTPStatus)
	}
	if e.What != "" {
		b.WriteString(": " + e.What)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *TransportError) Unwrap() error { return e.Err }

// CodeOf returns the extensions.code of err's *ResponseError (its first
// coded entry), or "" when err carries none.
func CodeOf(err error) string {
	var re *ResponseError
	if errors.As(err, &re) {
		return re.Code()
	}
	return ""
}

// fromGQL converts the errors genqlient decoded from a stream's update.
func fromGQL(list gqlerror.List) *ResponseError {
	re := &ResponseError{}
	for _, ge := range list {
		if ge == nil {
			continue
		}
		e := Error{Message: ge.Message}
		for _, p := range ge.Path {
			e.Path = append(e.Path, p)
		}
		e.setExtensions(ge.Extensions)
		re.Errors = append(re.Errors, e)
	}
	return re
}
