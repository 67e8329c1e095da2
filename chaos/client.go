package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// retryableCodes are the extensions.code values after which a keyed write
// is sent again: the outcome is unknown or the service could not reach the
// database. UNAVAILABLE and TIMEOUT are what the service answers
// while PostgreSQL restarts (issue 10 item 7); INTERNAL is retried and counted; an error
// carrying extensions.retryable = true is retried whatever its code.
var retryableCodes = []string{fault.Internal, fault.Unavailable, fault.Timeout}

// errRefused marks a write the service refused for good (a code that
// retrying cannot change, such as IDEMPOTENCY_CONFLICT).
var errRefused = errors.New("refused")

// client sends GraphQL operations round-robin over the replicas; each
// attempt goes to the next replica, so a retry usually reaches the other one.
type client struct {
	urls []string
	next atomic.Uint64
	http *http.Client

	mu     sync.Mutex
	causes map[string]int // retried attempts by cause: "transport", "http 502", a code
}

func newClient(urls []string) *client {
	return &client{urls: urls, http: &http.Client{Timeout: 20 * time.Second}, causes: map[string]int{}}
}

// gqlError is one entry of a GraphQL answer's errors list.
type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// attemptError is a failed attempt: cause names it for the figures, and
// retry says whether the same request may be sent again.
type attemptError struct {
	cause string
	retry bool
	err   error
}

func (e *attemptError) Error() string { return e.cause + ": " + e.err.Error() }

// post sends one operation to the next replica and decodes data into out.
func (c *client) post(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return &attemptError{cause: "encode", err: err}
	}
	url := c.urls[int(c.next.Add(1)%uint64(len(c.urls)))]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &attemptError{cause: "request", err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return &attemptError{cause: "transport", retry: true, err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return &attemptError{cause: "transport", retry: true, err: err}
	}
	var ans struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		// Not a GraphQL answer (a proxy page, a cut-off body): try again.
		return &attemptError{cause: fmt.Sprintf("http %d", resp.StatusCode), retry: true, err: fmt.Errorf("%.200s", raw)}
	}
	if len(ans.Errors) > 0 {
		e := ans.Errors[0]
		code, _ := e.Extensions["code"].(string)
		retryable, _ := e.Extensions["retryable"].(bool)
		if code == "" {
			code = "no code"
		}
		return &attemptError{cause: code, retry: retryable || slices.Contains(retryableCodes, code),
			err: fmt.Errorf("%s (%s)", e.Message, code)}
	}
	if out != nil {
		if err := json.Unmarshal(ans.Data, out); err != nil {
			return &attemptError{cause: "decode", err: err}
		}
	}
	return nil
}

// put sends w until it is acknowledged, retrying with the same idempotency
// key after a retryable failure (backoff 50ms doubling to 1s) for at most
// budget. It sets w.Version, w.Attempts and w.Err. It returns errRefused
// (wrapped) for an answer retrying cannot change, and ctx.Err() when the run
// is cancelled.
func (c *client) put(ctx context.Context, w *Write, budget time.Duration) error {
	const op = `mutation Put($ns: String!, $key: String!, $value: JSON!, $idem: String) {
  ledger { putValue(namespace: $ns, key: $key, value: $value, idempotencyKey: $idem) { version } }
}`
	vars := map[string]any{"ns": w.Namespace, "key": w.Key, "value": json.RawMessage(w.Value), "idem": w.IdemKey}
	deadline := time.Now().Add(budget)
	backoff := 50 * time.Millisecond
	for {
		w.Attempts++
		var out struct {
			Ledger struct {
				PutValue struct{ Version int64 }
			}
		}
		err := c.post(ctx, op, vars, &out)
		if err == nil {
			w.Version = out.Ledger.PutValue.Version
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *attemptError
		if !errors.As(err, &ae) || !ae.retry {
			w.Err = err.Error()
			return fmt.Errorf("%w: %s/%s: %v", errRefused, w.Namespace, w.Key, err)
		}
		c.count(ae.cause)
		if time.Now().Add(backoff).After(deadline) {
			w.Err = fmt.Sprintf("not acknowledged after %d attempts in %s; last: %v", w.Attempts, budget, err)
			return errors.New(w.Err)
		}
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (c *client) count(cause string) {
	c.mu.Lock()
	c.causes[cause]++
	c.mu.Unlock()
}

// retryCauses returns a copy of the retried attempts by cause.
func (c *client) retryCauses() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.causes)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
