package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Khan/genqlient/graphql"
)

// Defaults of a Client.
const (
	// DefaultServer is the server address when none is given: the service's
	// default listen address (ADDR).
	DefaultServer = "http://127.0.0.1:8080"
	// DefaultRequestTimeout bounds one query or mutation, from sending the
	// request to reading the whole answer.
	DefaultRequestTimeout = 60 * time.Second
	// MaxAnswerBytes bounds one answer (a query's body, or one event of a
	// stream); past it the answer is a *TransportError.
	MaxAnswerBytes = 64 << 20
)

// Options configure a Client; the zero value is valid.
type Options struct {
	// Token is a bearer token sent as `Authorization: Bearer <Token>` with
	// every request; empty: no Authorization header (a server with AUTH=off).
	Token string
	// HTTPClient sends the requests; nil: a client of its own. Its Timeout,
	// if any, also cuts streams, so leave it zero and use RequestTimeout.
	HTTPClient *http.Client
	// RequestTimeout bounds each query and mutation; zero:
	// DefaultRequestTimeout. Streams are bounded by their context only.
	RequestTimeout time.Duration
}

// Client talks GraphQL to one actionsledger server. It implements
// graphql.Client for the generated query and mutation functions; see the
// package documentation for its errors. A Client is safe for concurrent use.
type Client struct {
	endpoint string
	token    string
	http     *http.Client
	timeout  time.Duration
}

var _ graphql.Client = (*Client)(nil)

// New returns a client of the server at server, a base URL such as
// http://127.0.0.1:8080 (or its GraphQL endpoint, .../graphql); see
// Endpoint. An empty server is DefaultServer.
func New(server string, opts Options) (*Client, error) {
	endpoint, err := Endpoint(server)
	if err != nil {
		return nil, err
	}
	c := &Client{endpoint: endpoint, token: opts.Token, http: opts.HTTPClient, timeout: opts.RequestTimeout}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultRequestTimeout
	}
	return c, nil
}

// Endpoint returns the GraphQL endpoint of server: an http or https URL with
// a host, given as the server's base URL (/graphql is appended) or as the
// endpoint itself (a path ending in /graphql, kept). A trailing slash is
// ignored; a query or fragment is an error, as is another scheme.
func Endpoint(server string) (string, error) {
	if strings.TrimSpace(server) == "" {
		server = DefaultServer
	}
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", server, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("server URL %q: write http://HOST:PORT or https://HOST:PORT", server)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("server URL %q: no query, fragment or user info, please", server)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/graphql") {
		u.Path += "/graphql"
	}
	u.RawPath = ""
	return u.String(), nil
}

// Endpoint returns the GraphQL endpoint the client sends to.
func (c *Client) Endpoint() string { return c.endpoint }

// Base returns the server's base URL: the GraphQL endpoint without its
// /graphql (the other endpoints, such as /mcp, are under it).
func (c *Client) Base() string { return strings.TrimSuffix(c.endpoint, "/graphql") }

// HTTPClient returns an http.Client that sends the client's bearer token
// (if any) with every request, for the server's other endpoints (/mcp).
func (c *Client) HTTPClient() *http.Client {
	hc := *c.http
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = bearer{token: c.token, next: next}
	return &hc
}

// bearer sets the Authorization header of every request it sends.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// MakeRequest sends req as a POST and decodes the answer's data into
// resp.Data (implementing graphql.Client). Errors: *ResponseError when the
// answer carries GraphQL errors (resp.Data keeps whatever data came with
// them), *TransportError when no GraphQL answer arrived, or the context's
// error wrapped in a *TransportError when ctx ended first.
func (c *Client) MakeRequest(ctx context.Context, req *graphql.Request, resp *graphql.Response) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hresp, err := c.post(ctx, req, "application/graphql-response+json, application/json;q=0.9")
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	body, err := readAnswer(hresp.Body)
	if err != nil {
		return c.transport(hresp.StatusCode, "reading the answer", err)
	}
	return c.decodeAnswer(hresp, body, resp)
}

// post sends req to the endpoint as JSON with the given Accept header. A
// request that gets no HTTP answer is a *TransportError.
func (c *Client) post(ctx context.Context, req *graphql.Request, accept string) (*http.Response, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", req.OpName, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, &buf)
	if err != nil {
		return nil, c.transport(0, "", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", accept)
	if c.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.token)
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return nil, c.transport(0, "", err)
	}
	return hresp, nil
}

// wireAnswer is a GraphQL answer as it arrives.
type wireAnswer struct {
	Data   json.RawMessage `json:"data"`
	Errors []wireError     `json:"errors"`
}

type wireError struct {
	Message    string          `json:"message"`
	Path       []any           `json:"path"`
	Extensions json.RawMessage `json:"extensions"`
}

// decodeAnswer decodes a GraphQL answer (JSON with data and/or errors) into
// resp. Anything else is a *TransportError naming the HTTP status.
func (c *Client) decodeAnswer(hresp *http.Response, body []byte, resp *graphql.Response) error {
	var a wireAnswer
	if !isJSON(hresp.Header.Get("Content-Type")) || json.Unmarshal(body, &a) != nil || (a.Data == nil && a.Errors == nil) {
		return c.transport(hresp.StatusCode, "not a GraphQL answer: "+snippet(body), nil)
	}
	if len(a.Data) > 0 && !bytes.Equal(a.Data, []byte("null")) && resp != nil && resp.Data != nil {
		if err := json.Unmarshal(a.Data, resp.Data); err != nil {
			return c.transport(hresp.StatusCode, "decoding the data", err)
		}
	}
	if len(a.Errors) > 0 {
		re := &ResponseError{HTTPStatus: hresp.StatusCode}
		for _, we := range a.Errors {
			re.Errors = append(re.Errors, we.decode())
		}
		return re
	}
	if hresp.StatusCode != http.StatusOK {
		return c.transport(hresp.StatusCode, "an answer without errors", nil)
	}
	return nil
}

func (we wireError) decode() Error {
	e := Error{Message: we.Message, Path: we.Path}
	var ext map[string]any
	if len(we.Extensions) > 0 && json.Unmarshal(we.Extensions, &ext) == nil {
		e.setExtensions(ext)
	}
	return e
}

func (c *Client) transport(status int, what string, err error) *TransportError {
	return &TransportError{URL: c.endpoint, HTTPStatus: status, What: what, Err: err}
}

// readAnswer reads at most MaxAnswerBytes of r.
func readAnswer(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxAnswerBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > MaxAnswerBytes {
		return nil, fmt.Errorf("answer larger than %d bytes", MaxAnswerBytes)
	}
	return body, nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || mt == "application/graphql-response+json")
}

func mediaType(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

// snippet is the start of body for an error message, on one line.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 120 {
		i := 120
		for i > 0 && s[i]&0xC0 == 0x80 { // not inside a UTF-8 sequence
			i--
		}
		s = s[:i] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
