package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// Requests to actions served over MCP (issue 17, I4): a tools/call of such
// an action is delivered to one of its sessions as a REQUEST input
// (session.DeliverRequest), and the call waits for the turn that answers
// it, telling the client what it waits on in progress notifications. The
// request is committed before the wait begins: a client that goes away
// loses nothing (the turn still runs, once), and one that calls again
// with the same request key waits for the same answer.

// Keys of _meta in requests, results and progress notifications.
const (
	// MetaRequestKey, in a call's _meta, names the request (1-128 letters,
	// digits, _ . : or -): calling again with the same key waits for the
	// first call's answer instead of asking again. Results and progress
	// notifications carry it back.
	MetaRequestKey = "actionsledger/requestKey"
	// MetaInput is the REQUEST input's identity, request/<key>.
	MetaInput = "actionsledger/input"
	// MetaInterrupts lists, in a progress notification, what the session
	// waits on: [{interruptId, kind, tool?, input?, cause?}].
	MetaInterrupts = "actionsledger/interrupts"
	// MetaKind tells, in tools/list, a request to a session (KindRequest)
	// from a tool call.
	MetaKind = "actionsledger/kind"
)

// stoppingKey carries a channel closed when the server begins to shut
// down (WithStopping).
type stoppingKey struct{}

// WithStopping returns ctx carrying done, closed when the server begins to
// shut down: requests waiting for their answer then stop waiting and tell
// the client to call again (their requests are not affected).
func WithStopping(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, stoppingKey{}, done)
}

func stopping(ctx context.Context) <-chan struct{} {
	done, _ := ctx.Value(stoppingKey{}).(<-chan struct{})
	return done // nil: never
}

// ask serves a call of an action served over MCP: delivers the request
// and waits for its answer.
func (s *Server) ask(ctx context.Context, p auth.Principal, r *request, e *entry, req *gomcp.CallToolRequest) (gomcp.Result, error) {
	if s.opts.Sessions == nil || s.opts.Turns == nil {
		return nil, rpcError(codeInvalidParams, fault.NotFound, "unknown tool %q", req.Params.Name)
	}
	comp, err := s.opts.Actions.Compiled(ctx, e.v.ActionID, e.v.Version)
	if err != nil {
		return s.callError(ctx, e, err)
	}
	key, err := requestKey(req)
	if err != nil {
		return toolError(fault.As(err)), nil
	}
	args := req.Params.Arguments
	if len(strings.TrimSpace(string(args))) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	d, err := s.opts.Sessions.DeliverRequest(ctx, comp, session.Request{Key: key, Tool: e.name,
		Arguments: jsonvalue.Value(args), Principal: p.ID, MCPSession: r.mcpSession})
	if err != nil {
		return s.callError(ctx, e, err)
	}
	w := &waiter{s: s, e: e, d: d, key: key, req: req}
	return w.wait(ctx, r)
}

// requestKey is the call's _meta request key, or a new one.
func requestKey(req *gomcp.CallToolRequest) (string, error) {
	if req.Params.Meta != nil {
		if v, ok := req.Params.Meta[MetaRequestKey]; ok {
			k, isString := v.(string)
			if !isString || len(k) == 0 || len(k) > session.MaxRequestKeyLen {
				return "", fault.New(fault.BadInput, "_meta."+MetaRequestKey, "a request key is a string of 1-%d letters, digits, _ . : or -", session.MaxRequestKeyLen)
			}
			return k, nil
		}
	}
	return uuid.NewString(), nil
}

// waiter waits for one request's answer.
type waiter struct {
	s   *Server
	e   *entry
	d   *session.Delivered
	key string
	req *gomcp.CallToolRequest
	// progress counts the notifications sent; last is the latest message.
	progress float64
	last     string
}

// wait reads the request after every change of its session (and every
// Poll) until it is answered, its session closes, the wait runs out, the
// server stops or the client goes away.
func (w *waiter) wait(ctx context.Context, r *request) (gomcp.Result, error) {
	s := w.s
	var notes <-chan ledger.Note
	if s.opts.Feed != nil {
		key := session.SIDKey(w.d.SID)
		sub := s.opts.Feed.Subscribe(ledger.Topic{Channel: session.SessionsChannel, Key: key}, ledger.Topic{Channel: session.InboxChannel, Key: key})
		defer sub.Close()
		notes = sub.C()
	}
	deadline := time.NewTimer(s.opts.AskWait)
	defer deadline.Stop()
	poll := time.NewTicker(s.opts.Poll)
	defer poll.Stop()
	beat := time.NewTicker(s.opts.Heartbeat)
	defer beat.Stop()
	gone := r.ctx.Done()
	for {
		st, err := s.opts.Sessions.ReadRequest(ctx, w.d.SID, w.d.Input.Seq)
		if err != nil {
			return w.readError(ctx, err)
		}
		if st == nil {
			return nil, s.internal(fmt.Errorf("request %s of session %d is gone", w.d.Input.Identity, w.d.SID), "ask")
		}
		if res, done, err := w.settled(ctx, st); done {
			return res, err
		}
		w.report(ctx, st)
		select {
		case _, ok := <-notes:
			if !ok {
				notes = nil // the feed closed: polling goes on
			}
		case <-poll.C:
		case <-beat.C:
			w.notify(ctx, w.last, nil)
		case <-deadline.C:
			return w.pending(fmt.Sprintf("no answer within %s", s.opts.AskWait)), nil
		case <-stopping(r.ctx):
			return w.pending("the server is shutting down"), nil
		case <-gone:
			// The client went away: the request stays, and its turn runs.
			return nil, ctx.Err()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// readError answers a failed read: the wait cannot go on, but the request
// stands, so the client may call again with its key.
func (w *waiter) readError(ctx context.Context, err error) (gomcp.Result, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if w.s.opts.Unavailable != nil && w.s.opts.Unavailable(err) {
		return w.pending("the database is unavailable"), nil
	}
	return nil, w.s.internal(err, "ask: read request")
}

// settled returns the call's answer once the request has one or never
// will (its session closed first); done false while it waits.
func (w *waiter) settled(ctx context.Context, st *session.RequestState) (gomcp.Result, bool, error) {
	in := st.Input
	switch {
	case st.Answered() && in.ExecutionID == nil:
		return w.failed(fault.New(fault.RequestSkipped, "",
			"the turn that took this request was held and a responder skipped it (SKIP): the request has no answer; ask again")), true, nil
	case st.Answered():
		x, err := w.s.opts.Turns.Execution(ctx, *in.ExecutionID)
		if err != nil {
			return nil, true, w.s.internal(err, "ask: read execution")
		}
		if x == nil {
			return nil, true, w.s.internal(fmt.Errorf("execution %s is missing", *in.ExecutionID), "ask")
		}
		if x.Status != turns.ExecSucceeded {
			msg := fmt.Sprintf("the turn that took this request failed (execution %s)", x.ID)
			if x.Error != nil {
				msg += ": " + *x.Error
			}
			return w.failed(fault.New(fault.CallFailed, "", "%s", msg)), true, nil
		}
		return w.answer(x), true, nil
	case st.Session.Status.Final():
		why := string(st.Session.Status)
		if st.Session.Reason != nil {
			why += ": " + *st.Session.Reason
		}
		return w.failed(fault.New(fault.SessionClosed, "", "the session %q closed before it answered this request (%s)", st.Session.ID, why)), true, nil
	}
	return nil, false, nil
}

// answer is the call's result from the execution that answered it: the
// output's text (an agent's latest message) or the output as JSON, the
// output as structured content when it is an object, and the request's
// execution, session and input in _meta.
func (w *waiter) answer(x *turns.Execution) *gomcp.CallToolResult {
	out := x.Output
	if len(out) == 0 {
		out = jsonvalue.Value("null")
	}
	text := string(out)
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	if dec.Decode(&obj) == nil && obj != nil {
		if t, ok := obj["text"].(string); ok && t != "" {
			text = t
		}
	} else {
		obj = nil
	}
	res := &gomcp.CallToolResult{Meta: w.meta(), Content: []gomcp.Content{&gomcp.TextContent{Text: text}}}
	res.Meta[MetaExecutionID] = x.ID.String()
	if obj != nil {
		res.StructuredContent = obj
	}
	return res
}

// failed is a request that will get no answer, as a tool error.
func (w *waiter) failed(fe *fault.Error) *gomcp.CallToolResult {
	res := toolError(fe)
	for k, v := range w.meta() {
		res.Meta[k] = v
	}
	return res
}

// pending is the answer of a call that stopped waiting while its request
// stands: TIMEOUT (retryable) with the request's key, which a new call
// passes in _meta to wait for the same answer.
func (w *waiter) pending(why string) *gomcp.CallToolResult {
	return w.failed(fault.New(fault.Timeout, "",
		"%s; the request stands (%s in session %q) and its turn will answer it: call %s again with _meta %q = %q to wait for that answer",
		why, w.d.Input.Identity, w.d.SessionID, w.e.name, MetaRequestKey, w.key))
}

func (w *waiter) meta() gomcp.Meta {
	return gomcp.Meta{MetaActionID: w.e.v.ActionID.String(), MetaSessionID: w.d.SessionID,
		MetaInput: w.d.Input.Identity, MetaRequestKey: w.key}
}

// report tells the client, when it changed, what the request waits on.
func (w *waiter) report(ctx context.Context, st *session.RequestState) {
	msg, waiting := describe(st)
	if msg == w.last {
		return
	}
	w.last = msg
	w.notify(ctx, msg, waiting)
}

// notify sends a progress notification, when the client asked for them
// (a progress token in the call's _meta).
func (w *waiter) notify(ctx context.Context, msg string, waiting []map[string]any) {
	token := w.req.Params.GetProgressToken()
	if token == nil || msg == "" || w.req.Session == nil {
		return
	}
	w.progress++
	meta := w.meta()
	if waiting != nil {
		meta[MetaInterrupts] = waiting
	}
	err := w.req.Session.NotifyProgress(ctx, &gomcp.ProgressNotificationParams{ProgressToken: token, Progress: w.progress, Message: msg, Meta: meta})
	if err != nil && !errors.Is(err, context.Canceled) {
		w.s.log.Warn("mcp: progress notification", "err", err)
	}
}

// describe says what a request waits on, for a progress notification:
// its turn, or the approvals and holds a person must answer in the inbox
// (listed as MetaInterrupts).
func describe(st *session.RequestState) (string, []map[string]any) {
	in, s := st.Input, st.Session
	var waiting []map[string]any
	var parts []string
	for _, it := range st.Waiting {
		m := map[string]any{"interruptId": it.ID.String(), "kind": string(it.Kind)}
		switch it.Kind {
		case session.InterruptApproval:
			tool := deref(it.ToolName)
			m["tool"] = tool
			if len(it.Input) > 0 {
				m["input"] = json.RawMessage(it.Input)
			}
			parts = append(parts, fmt.Sprintf("approval of a call to %s (interrupt %s)", tool, it.ID))
		case session.InterruptHold:
			if it.Cause != nil {
				m["cause"] = string(*it.Cause)
			}
			parts = append(parts, fmt.Sprintf("an answer to held turn %d (interrupt %s: RETRY runs it again, SKIP leaves this request unanswered)", it.Turn, it.ID))
		}
		waiting = append(waiting, m)
	}
	switch {
	case len(parts) > 0:
		return fmt.Sprintf("session %q waits for %s; answer in the inbox (respondToSession)", s.ID, strings.Join(parts, " and ")), waiting
	case in.Status == session.InputPending && in.Turn == nil:
		return fmt.Sprintf("delivered to session %q as %s; waiting for its turn", s.ID, in.Identity), nil
	case in.Turn != nil:
		return fmt.Sprintf("turn %d of session %q took the request; waiting for it to finish", *in.Turn, s.ID), nil
	}
	return fmt.Sprintf("waiting in session %q", s.ID), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
