package tools_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// reportVersion is a tool that answers with the version it ran as.
func reportVersion(_ context.Context, req *turns.CallRequest) (jsonvalue.Value, error) {
	return jsonvalue.Encode(map[string]any{"version": req.Version})
}

// A2: a call into a tool session that exists runs the version the session
// started with (its inputSchema and its code); a call that starts a new
// session runs the current version.
func TestA2CallIntoExistingSessionKeepsItsVersion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.setTool(reportVersion)
	v1 := notifyTool()
	aid := f.create(v1)
	res, err := f.svc.Call(f.ctx, aid, in(`{"account_id":"old"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"version":1}`, string(res.Output))

	// v2 makes note required.
	v2 := notifyTool()
	v2.Tool.InputSchema = jsonvalue.Value(`{"type":"object","properties":{"account_id":{"type":"string"},"note":{"type":"string"}},"required":["account_id","note"]}`)
	_, err = f.actions.Update(f.ctx, aid, v2)
	require.NoError(t, err)

	res, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"old"}`))
	require.NoError(t, err, "v1's inputSchema applies to the v1 session")
	require.JSONEq(t, `{"version":1}`, string(res.Output))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM executions WHERE sid = $1 AND version = 1`, res.SID))

	_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"new"}`))
	require.Equal(t, fault.BadInput, fault.CodeOf(err), "a new session gets v2's inputSchema")
	require.Empty(t, f.calls(aid, "new"))
	res, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"new","note":"n"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"version":2}`, string(res.Output))
	s, err := f.sessions.Get(f.ctx, aid, "new")
	require.NoError(t, err)
	require.Equal(t, 2, s.Version)
}

// A2: a disabled or archived tool refuses calls with ACTION_INACTIVE,
// records nothing, and works again once ACTIVE.
func TestA2InactiveToolRefusesCalls(t *testing.T) {
	t.Parallel()
	f := setup(t)
	aid := f.create(notifyTool())
	for _, status := range []string{action.StatusDisabled, action.StatusArchived} {
		_, err := f.actions.SetStatus(f.ctx, aid, status)
		require.NoError(t, err)
		_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"a"}`))
		fe := fault.As(err)
		require.NotNil(t, fe, "%v", err)
		require.Equal(t, fault.ActionInactive, fe.Code)
		require.Equal(t, "actionId", fe.Field)
		require.Contains(t, fe.Message, status)
	}
	require.Zero(t, f.count(`SELECT count(*) FROM sessions WHERE action_id = $1`, aid))
	require.Zero(t, f.count(`SELECT count(*) FROM executions WHERE action_id = $1`, aid))

	_, err := f.actions.SetStatus(f.ctx, aid, action.StatusActive)
	require.NoError(t, err)
	_, err = f.svc.Call(f.ctx, aid, in(`{"account_id":"a"}`))
	require.NoError(t, err)
}
