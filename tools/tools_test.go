package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/pgtest"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/tools"
	"github.com/actionsledger/actionsledger/turns"
)

const testKind = "test.tool"

// callFunc is a tool written in Go for these tests.
type callFunc func(ctx context.Context, req *turns.CallRequest) (jsonvalue.Value, error)

func (f callFunc) Call(ctx context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
	return f(ctx, req)
}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	pool     *pgxpool.Pool
	clock    *clock.Manual
	actions  *action.Store
	sessions *session.Store
	svc      *tools.Service
	mu       sync.Mutex
	fn       callFunc
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: t.Context(), pool: pgtest.NewPool(t), clock: clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))}
	f.fn = echoInput
	kinds := turns.NewRegistry(turns.Kind{Name: testKind,
		New: func(turns.Spec) (turns.Handler, error) { return nil, errors.New("not a turn handler") },
		NewTool: func(turns.Spec) (turns.ToolHandler, error) {
			return callFunc(func(ctx context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
				f.mu.Lock()
				fn := f.fn
				f.mu.Unlock()
				return fn(ctx, req)
			}), nil
		}})
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	f.actions = action.NewStore(f.pool, f.clock, kinds)
	f.sessions = session.NewStore(f.pool, f.clock)
	f.svc = tools.NewService(f.pool, f.actions, kinds, f.clock, log)
	return f
}

func (f *fixture) setTool(fn callFunc) {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
}

func echoInput(_ context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
	n := 0
	if req.Session != nil {
		n = len(req.Session.Inputs)
	}
	return jsonvalue.Encode(map[string]any{"got": json.RawMessage(req.Input), "earlier_calls": n})
}

// notifyTool is the tool of ../shared/examples/tool_with_session.graphql-fragment.
func notifyTool() action.Definition {
	desc := "Notify human operations about a finding."
	return action.Definition{
		Name: "notify", Kind: testKind,
		Tool: &action.ToolDef{Name: "notify_human_ops", Description: &desc,
			InputSchema: jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string"},"note":{"type":"string"}},"required":["account_id"]}`),
			Session:     &action.ToolSessionDef{Start: &action.StartRole{Input: jsonvalue.Value(`{"account_id":"tool.input.account_id"}`)}}},
		Session: &action.SessionDef{
			InputSchema: jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}`),
			ID:          "string(session.input.account_id)",
		},
	}
}

func (f *fixture) create(def action.Definition) uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	_, err := f.actions.Create(f.ctx, id, def)
	require.NoError(f.t, err)
	return id
}

func in(s string) jsonvalue.Value { return jsonvalue.Value(s) }

// env returns the Env of a caller tool action's execution exec (uuid.Nil:
// none recorded), unrestricted as in dev mode.
func (f *fixture) env(w *ledger.Writer, exec uuid.UUID) turns.Env {
	f.t.Helper()
	id := f.create(action.Definition{Name: "caller", Kind: testKind, Tool: &action.ToolDef{Name: "caller"}})
	comp, err := f.actions.Compiled(f.ctx, id, 1)
	require.NoError(f.t, err)
	return f.svc.Env(w, turns.Run{ExecutionID: exec, Action: comp})
}

func (f *fixture) calls(actionID uuid.UUID, id string) []session.Input {
	f.t.Helper()
	s, err := f.sessions.Get(f.ctx, actionID, id)
	require.NoError(f.t, err)
	if s == nil {
		return nil
	}
	ins, err := f.sessions.Inputs(f.ctx, s.SID, "", 1000, nil)
	require.NoError(f.t, err)
	return ins
}

func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.pool.QueryRow(f.ctx, sql, args...).Scan(&n))
	return n
}

// X1, X4: a call starts its session and records one CALL input whose
// identity is the call's execution id, with the effective input and output.
func TestX1X4CallRecordsInItsSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	res, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"a1","note":"look"}`))
	require.NoError(t, err)
	require.Equal(t, "a1", res.SessionID)
	require.JSONEq(t, `{"got":{"account_id":"a1","note":"look"},"earlier_calls":0}`, string(res.Output))

	s, err := f.sessions.Get(f.ctx, aid, "a1")
	require.NoError(t, err)
	require.Equal(t, session.Open, s.Status, "X6: a tool session stays OPEN")
	require.JSONEq(t, `{"account_id":"a1"}`, string(s.Input))
	ins := f.calls(aid, "a1")
	require.Len(t, ins, 1)
	require.Equal(t, session.KindCall, ins[0].Kind)
	require.Equal(t, res.ExecutionID.String(), ins[0].Identity)
	require.Equal(t, res.ExecutionID, *ins[0].ExecutionID)
	require.Nil(t, ins[0].CallerExecutionID, "a direct call has no calling execution")

	_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"a1"}`))
	require.NoError(t, err)
	require.Len(t, f.calls(aid, "a1"), 2, "every call records; the second saw the first")
	require.Equal(t, 0, f.count(`SELECT count(*) FROM session_turns`), "X2: a tool session has no turns")
}

// X2: concurrent first calls for one session all succeed.
func TestX2ConcurrentFirstCallsAllSucceed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"race"}`))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, f.calls(aid, "race"), n)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM sessions WHERE action_id = $1`, aid))
}

// X2: calls never wait for one another: a call blocked in its handler does
// not hold up another call to the same session.
func TestX2CallsNeverWaitForEachOther(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	entered := make(chan struct{}, 1)
	f.setTool(func(ctx context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
		if string(req.Input) == `{"account_id":"s","note":"slow"}` {
			entered <- struct{}{}
			<-release
		}
		return in(`"ok"`), nil
	})
	slow := make(chan error, 1)
	go func() {
		_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"s","note":"slow"}`))
		slow <- err
	}()
	<-entered
	_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"s","note":"fast"}`))
	require.NoError(t, err, "the fast call completes while the slow one runs")
	require.Len(t, f.calls(aid, "s"), 1)
	once.Do(func() { close(release) })
	require.NoError(t, <-slow)
	require.Len(t, f.calls(aid, "s"), 2)
}

// X2: a session whose first call rolls back exists, with no history.
func TestX2FirstCallRolledBackLeavesAnEmptySession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	f.setTool(func(context.Context, *turns.CallRequest) (jsonvalue.Value, error) { return nil, errors.New("boom") })
	_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"rb"}`))
	require.Equal(t, fault.CallFailed, fault.CodeOf(err))
	s, err := f.sessions.Get(f.ctx, aid, "rb")
	require.NoError(t, err)
	require.NotNil(t, s)
	require.Empty(t, f.calls(aid, "rb"))
	require.Equal(t, 0, f.count(`SELECT count(*) FROM executions`), "nothing of the failed call commits")
}

// X3: a call whose session exists with another input fails; a call to a
// closed session fails with SESSION_CLOSED and runs and records nothing.
func TestX3ConflictAndClosed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	def := notifyTool()
	def.Tool.Session.Start.Input = in(`{"account_id":"tool.input.account_id","tier":"has(tool.input.note) ? tool.input.note : 'none'"}`)
	def.Session.InputSchema = nil
	aid := f.create(def)
	_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"c"}`))
	require.NoError(t, err)
	_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"c","note":"gold"}`))
	require.Equal(t, fault.SessionInputConflict, fault.CodeOf(err))

	_, err = f.sessions.Close(f.ctx, aid, "c", "done")
	require.NoError(t, err)
	ran := false
	f.setTool(func(context.Context, *turns.CallRequest) (jsonvalue.Value, error) { ran = true; return in(`1`), nil })
	_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"c"}`))
	require.Equal(t, fault.SessionClosed, fault.CodeOf(err))
	require.False(t, ran, "a call to a closed session runs nothing")
	require.Len(t, f.calls(aid, "c"), 1)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM executions`))
}

// X3: the status is checked when the call starts: a call already running
// when the session is closed still records when it commits.
func TestX3StatusCheckedWhenTheCallStarts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"k"}`))
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	f.setTool(func(context.Context, *turns.CallRequest) (jsonvalue.Value, error) {
		close(entered)
		<-release
		return in(`"late"`), nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"k"}`))
		done <- err
	}()
	<-entered
	_, err = f.sessions.Close(f.ctx, aid, "k", "operator")
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-done)
	require.Len(t, f.calls(aid, "k"), 2, "a closed session can gain calls from transactions in flight at the close")
}

// X4: a call made inside a caller's transaction commits or rolls back with
// it, and records the calling execution.
func TestX4CallCommitsOrRollsBackWithTheCaller(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	caller := f.create(action.Definition{Name: "caller", Kind: testKind, Tool: &action.ToolDef{Name: "caller"}})
	callerExec := uuid.New()
	tx, err := f.pool.Begin(f.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(f.ctx, `INSERT INTO executions (id, action_id, version, status, started_at) VALUES ($1, $2, 1, 'RUNNING', now())`, callerExec, caller)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(f.ctx))

	for _, commit := range []bool{false, true} {
		w := ledger.NewWriter(f.pool, f.clock.Now)
		t.Cleanup(func() { w.Rollback(context.Background()) })
		env := f.env(w, callerExec)
		out, err := env.CallTool(f.ctx, aid.String(), in(`{"account_id":"w"}`))
		require.NoError(t, err)
		require.NotEmpty(t, out)
		_, err = env.LedgerPut(f.ctx, "audit", "w", in(`{"by":"tool test"}`))
		require.NoError(t, err)
		if commit {
			require.NoError(t, w.Commit(f.ctx))
		} else {
			w.Rollback(f.ctx)
		}
	}
	ins := f.calls(aid, "w")
	require.Len(t, ins, 1, "only the committed caller's call is in the history")
	require.Equal(t, callerExec, *ins[0].CallerExecutionID)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM events WHERE type = 'audit.inserted'`), "the caller's writes commit with it")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM executions WHERE parent_id = $1`, callerExec))
}

// X5: calls are listed in the order their transactions began, calls of one
// transaction in the order made; a transaction sees its own uncommitted calls.
func TestX5ListingOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	_, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"o","note":"first"}`))
	require.NoError(t, err)

	early := ledger.NewWriter(f.pool, f.clock.Now)
	t.Cleanup(func() { early.Rollback(context.Background()) })
	etx, err := early.Tx(f.ctx)
	require.NoError(t, err)
	_, err = etx.Exec(f.ctx, `SELECT 1`) // the early transaction has begun
	require.NoError(t, err)

	_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"o","note":"late"}`)) // begins and commits after early began
	require.NoError(t, err)

	env := f.env(early, uuid.Nil)
	for _, note := range []string{"early-1", "early-2"} {
		_, err := env.CallTool(f.ctx, aid.String(), in(`{"account_id":"o","note":"`+note+`"}`))
		require.NoError(t, err)
	}
	view, err := env.Session(f.ctx, aid.String(), "o")
	require.NoError(t, err)
	require.Equal(t, []string{"first", "early-1", "early-2", "late"}, notes(t, view.Inputs), "own uncommitted calls are visible, in begin order")
	require.Equal(t, []string{"first", "late"}, notes(t, inputViews(t, f, aid, "o")), "others see committed calls only")

	require.NoError(t, early.Commit(f.ctx))
	require.Equal(t, []string{"first", "early-1", "early-2", "late"}, notes(t, inputViews(t, f, aid, "o")))
}

// X6: session() finds the session a call records in even when the
// transaction began before the session existed.
func TestX6SessionFoundAfterTheTransactionBegan(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	w := ledger.NewWriter(f.pool, f.clock.Now)
	t.Cleanup(func() { w.Rollback(context.Background()) })
	env := f.env(w, uuid.Nil)
	v, err := env.Session(f.ctx, aid.String(), "x6")
	require.NoError(t, err)
	require.Nil(t, v, "no session yet")
	_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"x6"}`)) // another transaction creates it
	require.NoError(t, err)
	v, err = env.Session(f.ctx, aid.String(), "x6")
	require.NoError(t, err)
	require.NotNil(t, v)
	require.Equal(t, "x6", v.ID)
	require.Len(t, v.Inputs, 1)
}

func TestCallInputErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	plain := f.create(action.Definition{Name: "plain", Kind: testKind, Tool: &action.ToolDef{Name: "plain"}})
	for _, tc := range []struct {
		name   string
		action uuid.UUID
		input  string
		code   string
		field  string
	}{
		{"schema: missing account_id", aid, `{"note":"x"}`, fault.BadInput, "input"},
		{"schema: wrong type", aid, `{"account_id":5}`, fault.BadInput, "input"},
		{"not an object", aid, `[1]`, fault.BadInput, "input"},
		{"unknown action", uuid.New(), `{}`, fault.NotFound, "actionId"},
		{"NUL", aid, `{"account_id":"a\u0000"}`, fault.InvalidJSON, "input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Call(f.ctx, tc.action, in(tc.input))
			fe := fault.As(err)
			require.NotNil(t, fe, "%v", err)
			require.Equal(t, tc.code, fe.Code, fe.Message)
			require.Equal(t, tc.field, fe.Field)
		})
	}
	res, err := f.svc.Call(f.ctx, plain, in(`{"anything":1}`))
	require.NoError(t, err, "a tool without a session records no history")
	require.Zero(t, res.SID)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM executions WHERE action_id = $1 AND status = 'SUCCEEDED'`, plain))
}

func inputViews(t *testing.T, f *fixture, aid uuid.UUID, id string) []jsonvalue.Value {
	w := ledger.NewWriter(f.pool, f.clock.Now)
	defer w.Rollback(f.ctx)
	v, err := f.env(w, uuid.Nil).Session(f.ctx, aid.String(), id)
	require.NoError(t, err)
	return v.Inputs
}

func notes(t *testing.T, inputs []jsonvalue.Value) []string {
	var out []string
	for _, raw := range inputs {
		var item struct {
			Input struct {
				Note string `json:"note"`
			} `json:"input"`
		}
		require.NoError(t, json.Unmarshal(raw, &item))
		out = append(out, item.Input.Note)
	}
	return out
}

// A call holding a record lock in its transaction and calling a tool with
// a session must not wait on a connection held by callers queued on that
// lock (the pool is small on purpose here). Regression for a stall found by
// a fresh user: 20 concurrent calls that each write one key, then call a tool.
func TestNestedCallsUnderLockContentionDoNotStall(t *testing.T) {
	t.Parallel()
	f := setup(t)
	notify := f.create(notifyTool())
	outer := f.create(action.Definition{Name: "outer", Kind: testKind, Tool: &action.ToolDef{Name: "outer"}})
	f.setTool(func(ctx context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
		if req.Session != nil { // the inner, notify tool
			return in(`"ok"`), nil
		}
		if _, err := req.Env.LedgerPut(ctx, "contended", "same", req.Input); err != nil {
			return nil, err
		}
		return req.Env.CallTool(ctx, notify.String(), in(`{"account_id":"nested"}`))
	})
	const n = 20 // more than the test pool's connections
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ctx, cancel := context.WithTimeout(f.ctx, 60*time.Second)
	defer cancel()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.svc.Call(ctx, outer, in(fmt.Sprintf(`{"i":%d}`, i)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, f.calls(notify, "nested"), n)
}

// A failed call inside a caller's transaction leaves nothing behind (its
// execution row, its writes): the caller can go on and commit (an agent
// told of the failure). Calls that succeed are listed as the caller's
// children in the order made.
func TestFailedCallIsUndoneAndChildrenKeepOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(action.Definition{Name: "flaky", Kind: testKind, Tool: &action.ToolDef{Name: "flaky"}})
	f.setTool(func(ctx context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
		if _, err := req.Env.LedgerPut(ctx, "audit", "by-tool", in(`1`)); err != nil {
			return nil, err
		}
		if string(req.Input) == `{"fail":true}` {
			return nil, errors.New("the tool broke")
		}
		return req.Input, nil
	})
	caller := f.create(action.Definition{Name: "caller", Kind: testKind, Tool: &action.ToolDef{Name: "caller"}})
	callerExec := uuid.New()
	_, err := f.pool.Exec(f.ctx, `INSERT INTO executions (id, action_id, version, status, started_at) VALUES ($1, $2, 1, 'RUNNING', now())`, callerExec, caller)
	require.NoError(t, err)

	w := ledger.NewWriter(f.pool, f.clock.Now)
	env := f.env(w, callerExec)
	for i, input := range []string{`{"n":1}`, `{"fail":true}`, `{"n":2}`, `{"n":3}`} {
		_, err := env.CallTool(f.ctx, aid.String(), in(input))
		if i == 1 {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err)
	}
	require.NoError(t, w.Commit(f.ctx))
	require.Equal(t, 3, f.count(`SELECT count(*) FROM executions WHERE parent_id = $1`, callerExec), "the failed call left no execution")
	require.Equal(t, 0, f.count(`SELECT count(*) FROM executions WHERE parent_id = $1 AND status <> 'SUCCEEDED'`, callerExec))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM events WHERE type = 'audit.inserted'`))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM events WHERE type = 'audit.updated'`), "the failed call's write is undone with it")
	kids, err := turns.NewStore(f.pool).Children(f.ctx, callerExec, uuid.Nil, 10)
	require.NoError(t, err)
	var order []string
	for _, k := range kids {
		order = append(order, string(k.Input))
	}
	require.Equal(t, []string{`{"n": 1}`, `{"n": 2}`, `{"n": 3}`}, order, "children oldest first")
}

// Issue 11: a tool whose owner requires approval cannot be called from
// handler code (CallTool: APPROVAL_REQUIRED, nothing runs); only a call a
// person approved reaches it (CallApprovedTool), and a principal's direct
// call is not gated.
func TestGatedToolOnlyThroughAnApprovedCall(t *testing.T) {
	t.Parallel()
	f := setup(t)
	gated := f.create(action.Definition{Name: "gated", Kind: testKind, Tool: &action.ToolDef{Name: "gated", Approval: action.ApprovalRequired}})
	w := ledger.NewWriter(f.pool, f.clock.Now)
	defer w.Rollback(f.ctx)
	env := f.env(w, uuid.Nil)
	_, err := env.CallTool(f.ctx, gated.String(), in(`{}`))
	require.Equal(t, fault.ApprovalRequired, fault.CodeOf(err), "%v", err)
	require.Equal(t, "actionId", fault.As(err).Field)
	out, err := env.CallApprovedTool(f.ctx, gated.String(), in(`{"n":1}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"got":{"n":1},"earlier_calls":0}`, string(out))
	require.NoError(t, w.Commit(f.ctx))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM executions WHERE action_id = $1`, gated), "only the approved call ran")
	_, err = f.svc.Call(f.ctx, gated, in(`{}`))
	require.NoError(t, err)
}
