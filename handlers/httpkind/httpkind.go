package httpkind

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// KindName is the kind actions name.
const KindName = "http"

// Limits of the kind.
const (
	DefaultTimeout = 10 * time.Second
	MaxTimeout     = 60 * time.Second
	MinSecret      = 16      // bytes
	MaxSecret      = 4096    // bytes
	MaxReply       = 1 << 20 // bytes of reply body read
	maxURL         = 2048    // bytes
)

// Request headers.
const (
	HeaderTimestamp = "X-Actionsledger-Timestamp"
	HeaderSignature = "X-Actionsledger-Signature"
	HeaderExecution = "X-Actionsledger-Execution"
)

// Config is the kind's configuration.
type Config struct {
	URL       string `json:"url"`
	Secret    string `json:"secret"`
	TimeoutMS *int64 `json:"timeout_ms"`
}

// Body is the JSON a turn is POSTed as.
type Body struct {
	ActionID    uuid.UUID         `json:"action_id"`
	Version     int               `json:"version"`
	SessionID   string            `json:"session_id"`
	Input       jsonvalue.Value   `json:"input"`
	State       jsonvalue.Value   `json:"state"`
	Inputs      []turns.InputView `json:"inputs"`
	Turn        int               `json:"turn"`
	Final       bool              `json:"final"`
	EndsAt      *time.Time        `json:"ends_at"`
	ExecutionID uuid.UUID         `json:"execution_id"`
	Attempt     int               `json:"attempt"`
	// Credential reads this session over POST /graphql (Authorization:
	// Bearer <credential>) while the turn runs, and nothing else (T10).
	Credential string `json:"credential,omitempty"`
}

// Kind returns the kind for a turns.Registry. Request timestamps are read
// from clk (the service clock); egress decides where turns may be sent
// (nil: public addresses only).
func Kind(clk clock.Clock, egress *Egress) turns.Kind {
	client := egress.Client()
	return turns.Kind{Name: KindName, Credential: true, Secrets: []string{"secret"}, New: func(spec turns.Spec) (turns.Handler, error) {
		cfg, timeout, err := parse(spec, egress)
		if err != nil {
			return nil, err
		}
		return &handler{cfg: cfg, timeout: timeout, clock: clk, client: client}, nil
	}}
}

func parse(spec turns.Spec, egress *Egress) (Config, time.Duration, error) {
	var cfg Config
	if spec.Source != nil {
		return cfg, 0, fault.New(fault.InvalidConfig, "source", "http runs no source")
	}
	if len(spec.Config) == 0 || string(spec.Config) == "null" {
		return cfg, 0, fault.New(fault.InvalidConfig, "config.url", "http needs config {url, secret, timeout_ms}")
	}
	dec := json.NewDecoder(bytes.NewReader(spec.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, 0, fault.New(fault.InvalidConfig, "config", "http takes {url: string, secret: string, timeout_ms: integer from 1 to %d} and nothing else", MaxTimeout.Milliseconds())
	}
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return cfg, 0, fault.New(fault.InvalidConfig, "config.url", "url is required")
	case len(cfg.URL) > maxURL:
		return cfg, 0, fault.New(fault.InvalidConfig, "config.url", "url is at most %d bytes", maxURL)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return cfg, 0, fault.New(fault.InvalidConfig, "config.url", "url must be an absolute http or https URL")
	case egress.CheckURL(u) != nil:
		return cfg, 0, fault.New(fault.InvalidConfig, "config.url",
			"the url's host is a loopback, link-local or private address, which this server does not send to (allow it with HTTP_ALLOW)")
	}
	if cfg.Secret == turns.Redacted {
		return cfg, 0, fault.New(fault.InvalidConfig, "config.secret", "%s stands for the secret a stored version has, and this action has none: send the secret itself", turns.Redacted)
	}
	if len(cfg.Secret) < MinSecret || len(cfg.Secret) > MaxSecret {
		return cfg, 0, fault.New(fault.InvalidConfig, "config.secret", "secret is %d-%d bytes", MinSecret, MaxSecret)
	}
	timeout := DefaultTimeout
	if cfg.TimeoutMS != nil {
		timeout = time.Duration(*cfg.TimeoutMS) * time.Millisecond
		if *cfg.TimeoutMS < 1 || timeout > MaxTimeout {
			return cfg, 0, fault.New(fault.InvalidConfig, "config.timeout_ms", "timeout_ms is 1-%d", MaxTimeout.Milliseconds())
		}
	}
	return cfg, timeout, nil
}

type handler struct {
	cfg     Config
	timeout time.Duration
	clock   clock.Clock
	client  *http.Client
}

// Run POSTs the turn and reads the outcome from the reply. Errors marked
// turns.Permanent fail the turn at once; others are retried (T7).
func (h *handler) Run(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
	body, err := json.Marshal(Body{
		ActionID: req.ActionID, Version: req.Version, SessionID: req.SessionID, Input: orNull(req.Input),
		State: orNull(req.State), Inputs: orEmpty(req.Inputs), Turn: req.Turn, Final: req.Final, EndsAt: req.EndsAt,
		ExecutionID: req.ExecutionID, Attempt: req.Attempt, Credential: req.Credential,
	})
	if err != nil {
		return nil, turns.Permanent(fmt.Errorf("http: encode the turn: %w", err))
	}
	o, err := h.post(ctx, req.ExecutionID, body)
	if err != nil {
		note(req, "error", map[string]any{"url": h.cfg.URL, "attempt": req.Attempt, "error": err.Error()})
		return nil, err
	}
	return o, nil
}

func (h *handler) post(ctx context.Context, execID uuid.UUID, body []byte) (*turns.Outcome, error) {
	actx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(actx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, turns.Permanent(fmt.Errorf("http: %w", err))
	}
	ts := strconv.FormatInt(h.clock.Now().Unix(), 10)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(HeaderTimestamp, ts)
	hr.Header.Set(HeaderSignature, Sign(h.cfg.Secret, ts, body))
	hr.Header.Set(HeaderExecution, execID.String())
	resp, err := h.client.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the turn itself ended; the executor decides
		}
		if actx.Err() != nil {
			return nil, fmt.Errorf("http: no reply within %s", h.timeout)
		}
		if errors.Is(err, ErrEgress) {
			return nil, turns.Permanent(fmt.Errorf("http: %w", err))
		}
		return nil, fmt.Errorf("http: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxReply+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("http: reading the reply: %w", err)
	}
	switch c := resp.StatusCode; {
	case c >= 500 || c == http.StatusTooManyRequests:
		return nil, fmt.Errorf("http: receiver answered %d%s", c, excerpt(raw))
	case c < 200 || c > 299:
		return nil, turns.Permanent(fmt.Errorf("http: receiver answered %d%s", c, excerpt(raw)))
	}
	if len(raw) > MaxReply {
		return nil, turns.Permanent(fmt.Errorf("action_output_invalid: the reply is larger than %d bytes", MaxReply))
	}
	o, err := outcome(raw)
	if err != nil {
		return nil, turns.Permanent(fmt.Errorf("action_output_invalid: %w", err))
	}
	return o, nil
}

// outcome reads a reply body: an object with status and optionally state,
// output, reason and scope (G10), nothing else.
func outcome(raw []byte) (*turns.Outcome, error) {
	var r struct {
		State  jsonvalue.Value `json:"state"`
		Status *string         `json:"status"`
		Output jsonvalue.Value `json:"output"`
		Reason *string         `json:"reason"`
		Scope  *string         `json:"scope"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("the reply must be a JSON object {status, state, output, reason, scope} and nothing else: %v", err)
	}
	if dec.More() {
		return nil, errors.New("the reply has data after its JSON object")
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return nil, errors.New("the reply must be a JSON object")
	}
	if r.Status == nil {
		return nil, errors.New("the reply has no status")
	}
	o := &turns.Outcome{State: r.State, Status: *r.Status, Output: r.Output}
	if r.Reason != nil {
		o.Reason = *r.Reason
	}
	if r.Scope != nil {
		o.Scope = *r.Scope // G10: TURN fails only the turn
	}
	return o, nil
}

// excerpt quotes the start of a reply body for an error message.
func excerpt(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return ""
	}
	s = text.Cut(s, 200)
	return fmt.Sprintf(": %q", s)
}

func note(req *turns.Request, kind string, data any) {
	if req.Transcript != nil {
		req.Transcript.Add(kind, data)
	}
}

func orNull(v jsonvalue.Value) jsonvalue.Value {
	if len(v) == 0 {
		return jsonvalue.Value("null")
	}
	return v
}

func orEmpty(in []turns.InputView) []turns.InputView {
	if in == nil {
		return []turns.InputView{}
	}
	return in
}

// Errors of Verify.
var (
	ErrTimestamp = errors.New("httpkind: timestamp missing, malformed or outside the tolerance")
	ErrSignature = errors.New("httpkind: no valid v1 signature")
)

// Sign returns the X-Actionsledger-Signature value for body sent at
// timestamp (unix seconds, as text): "v1=" and the hex HMAC-SHA256 of
// "<timestamp>.<body>" keyed by secret.
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a request for receivers: timestamp is the
// X-Actionsledger-Timestamp header, body the raw request body, signature
// the X-Actionsledger-Signature header (one or more comma-separated
// "v1=<hex>" values; one match suffices). The timestamp must be within
// tolerance of now either way, which bounds replays; receivers should also
// deduplicate by X-Actionsledger-Execution. Errors: ErrTimestamp,
// ErrSignature.
func Verify(secret, timestamp, body, signature string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	want := []byte(Sign(secret, timestamp, []byte(body)))
	for _, s := range strings.Split(signature, ",") {
		if hmac.Equal([]byte(strings.TrimSpace(s)), want) {
			return nil
		}
	}
	return ErrSignature
}
