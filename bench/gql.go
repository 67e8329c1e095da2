package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// client is one keep-alive GraphQL client over HTTP: its own transport
// holding one connection, as the acceptance's load generator has.
type client struct {
	url  string
	http *http.Client
}

func newClient(url string) *client {
	return &client{url: url, http: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true},
		Timeout:   60 * time.Second,
	}}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// gqlError is an error in a GraphQL answer.
type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// answerError is an answer with errors; codes are their extensions.code.
type answerError struct{ errs []gqlError }

func (e *answerError) Error() string {
	msgs := make([]string, len(e.errs))
	for i, g := range e.errs {
		msgs[i] = fmt.Sprintf("%s (code %v)", g.Message, g.Extensions["code"])
	}
	return strings.Join(msgs, "; ")
}

// has reports whether an error of the answer has code and a message
// containing text.
func (e *answerError) has(code, text string) bool {
	for _, g := range e.errs {
		if g.Extensions["code"] == code && strings.Contains(g.Message, text) {
			return true
		}
	}
	return false
}

// do posts one operation and decodes its data into out (nil: not decoded;
// numbers are kept as json.Number). An answer with errors is an
// *answerError.
func (c *client) do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var ans struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&ans); err != nil {
		return fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if len(ans.Errors) > 0 {
		return &answerError{ans.Errors}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if out == nil {
		return nil
	}
	dec = json.NewDecoder(bytes.NewReader(ans.Data))
	dec.UseNumber()
	return dec.Decode(out)
}
