package starlarkrt_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/starlarkrt"
)

// fakeHost is an in-memory Host that records every call.
type fakeHost struct {
	clock *clock.Manual

	mu       sync.Mutex
	calls    []string // "method arg..." in call order
	kv       map[string]jsonvalue.Value
	versions map[string]int64
	sessions map[string]*starlarkrt.SessionView
	toolFunc func(actionID string, input jsonvalue.Value) (jsonvalue.Value, error)
	failWith error // returned by every method but Now when set
	panicIn  string
}

var testNow = time.Date(2025, 3, 14, 15, 9, 26, 535000000, time.UTC)

func newFakeHost() *fakeHost {
	return &fakeHost{
		clock:    clock.NewManual(testNow),
		kv:       map[string]jsonvalue.Value{},
		versions: map[string]int64{},
		sessions: map[string]*starlarkrt.SessionView{},
	}
}

func (h *fakeHost) record(ctx context.Context, method string, args ...any) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("host called without a deadline")
	}
	h.calls = append(h.calls, method+" "+fmt.Sprint(args...))
	if h.panicIn == method {
		panic("host exploded in " + method)
	}
	return h.failWith
}

func (h *fakeHost) recorded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *fakeHost) LedgerGet(ctx context.Context, namespace, key string) (jsonvalue.Value, bool, error) {
	if err := h.record(ctx, "LedgerGet", namespace, "/", key); err != nil {
		return nil, false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.kv[namespace+"/"+key]
	return v, ok, nil
}

func (h *fakeHost) LedgerPut(ctx context.Context, namespace, key string, value jsonvalue.Value) (int64, error) {
	if err := h.record(ctx, "LedgerPut", namespace, "/", key, " ", string(value)); err != nil {
		return 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kv[namespace+"/"+key] = value
	h.versions[namespace+"/"+key]++
	return h.versions[namespace+"/"+key], nil
}

func (h *fakeHost) Session(ctx context.Context, actionID, id string) (*starlarkrt.SessionView, error) {
	if err := h.record(ctx, "Session", actionID, " ", id); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[actionID+"/"+id], nil
}

func (h *fakeHost) CallTool(ctx context.Context, actionID string, input jsonvalue.Value) (jsonvalue.Value, error) {
	if err := h.record(ctx, "CallTool", actionID, " ", string(input)); err != nil {
		return nil, err
	}
	if h.toolFunc != nil {
		return h.toolFunc(actionID, input)
	}
	return input, nil
}

func (h *fakeHost) Now() time.Time {
	if h.panicIn == "Now" {
		panic("clock exploded")
	}
	return h.clock.Now()
}

// call runs src's main with event under lim.
func call(t *testing.T, h starlarkrt.Host, src, event string, lim starlarkrt.Limits) (string, error) {
	t.Helper()
	if lim.Timeout == 0 {
		// Tests of the other limits must not race the default 5 s deadline
		// on a loaded machine (the race detector slows steps down a lot);
		// TestLimitsTimeout tests the deadline itself.
		lim.Timeout = 2 * time.Minute
	}
	var ev jsonvalue.Value
	if event != "" {
		ev = jsonvalue.Value(event)
	}
	out, err := starlarkrt.Call(context.Background(), "test.star", src, "main", ev, h, lim)
	return string(out), err
}

// mustCall is call that fails the test on error.
func mustCall(t *testing.T, h starlarkrt.Host, src, event string) string {
	t.Helper()
	out, err := call(t, h, src, event, starlarkrt.Limits{})
	require.NoError(t, err)
	return out
}

// scriptError asserts err is a *ScriptError of kind and returns it.
func scriptError(t *testing.T, err error, kind string) *starlarkrt.ScriptError {
	t.Helper()
	var se *starlarkrt.ScriptError
	require.ErrorAs(t, err, &se)
	require.Equal(t, kind, se.Kind, "message: %s\n%s", se.Message, se.Backtrace)
	return se
}
