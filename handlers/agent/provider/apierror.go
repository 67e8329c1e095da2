package provider

import (
	"fmt"
	"net/http"
	"time"

	"github.com/actionsledger/actionsledger/internal/text"
)

// defaultTimeout bounds one HTTP attempt when a config leaves Timeout zero.
const defaultTimeout = 10 * time.Minute

// apiError is an HTTP error answer of a model API, reduced to what is safe
// to record: status, the API's error type and its message (no URL, headers
// or raw body, which may carry credentials).
type apiError struct {
	provider string
	status   int
	typ      string
	message  string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("provider: %s: HTTP %d", e.provider, e.status)
	if text := http.StatusText(e.status); text != "" { // Go has no name for 529 (Anthropic's overloaded)
		s += " " + text
	}
	if e.typ != "" {
		s += ": " + e.typ
	}
	if e.message != "" {
		s += ": " + text.Cut(e.message, 500)
	}
	return s
}

// classifyStatus marks an API error Permanent when sending the same request
// again cannot succeed: a malformed or too large request (400, 413, 422),
// a rejected credential (401, 403) or an unknown model or path (404).
// Everything else (408, 409, 429, 5xx, Anthropic's 529) is left retryable.
func classifyStatus(err *apiError) error {
	switch err.status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
		http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return Permanent(err)
	}
	return err
}

func retries(n int) int { return max(n, 0) }

func timeout(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultTimeout
	}
	return d
}
