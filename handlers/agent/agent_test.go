package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/handlers/agent/provider"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// TestToolThenOpen: a turn calls a plain tool, then reports OPEN with a
// new state (T5); the transcript follows the conversation in order.
func TestToolThenOpen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted([]any{ref(lookupID, nil)},
		step(0, map[string]any{"text": "Looking it up.", "toolCalls": []any{callTo("lookup", map[string]any{"q": "acct-1"})}}),
		step(1, map[string]any{"when": `"found":true`, "text": "All good.", "toolCalls": []any{report("OPEN", "", map[string]any{"seen": 1})}}),
	))
	out, rec, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	require.JSONEq(t, `{"seen":1}`, string(out.State))
	require.Empty(t, out.Approvals)
	require.Equal(t, []call{{Action: lookupID.String(), Input: `{"q":"acct-1"}`}}, b.env.recorded())

	var o map[string]any
	require.NoError(t, json.Unmarshal(out.Output, &o))
	require.Equal(t, "All good.", o["text"])
	require.EqualValues(t, 1, o["tool_calls"])
	require.EqualValues(t, 2, o["steps"])
	require.Contains(t, o["usage"], "input_tokens")

	require.Equal(t, []string{"input", "model_message", "tool_call", "tool_result", "model_message", "outcome"}, rec.kinds())
	input := rec.of("input")[0]["text"].(string)
	require.Contains(t, input, `Session "acct-1", turn 1.`)
	require.Contains(t, input, `Session input: {"account_id":"acct-1"}`)
	require.Contains(t, input, `Session state: {"seen":0}`)
	require.Contains(t, input, `{"kind":"EVENT","identity":"ev-1","triggers":["entry"],"event":{"type":"entry.inserted","data":{"amount":12},"commit_time":"2025-03-14T15:09:26Z"}}`)
	require.Equal(t, lookupID.String(), rec.of("tool_call")[0]["tool_action"])
}

// TestStateKeptWhenOmitted: report_outcome without state keeps the state.
func TestStateKeptWhenOmitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"toolCalls": []any{report("COMPLETED", "done", nil)}}))
	out, _, err := run(t, h, b.request())
	require.NoError(t, err)
	require.EqualValues(t, "COMPLETED", out.Status)
	require.Equal(t, "done", out.Reason)
	require.JSONEq(t, `{"seen":0}`, string(out.State))
}

// TestFixedInputOverrides: the reference's fixed input replaces the
// model's keys, top level only (P5's "fixed input still applied").
func TestFixedInputOverrides(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted([]any{ref(lookupID, map[string]any{"input": map[string]any{"account": "fixed", "opts": map[string]any{"a": 1}}})},
		step(0, map[string]any{"toolCalls": []any{callTo("lookup", map[string]any{"account": "model", "q": 1, "opts": map[string]any{"b": 2}})}}),
		step(1, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}),
	))
	_, _, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Equal(t, []call{{Action: lookupID.String(), Input: `{"account":"fixed","opts":{"a":1},"q":1}`}}, b.env.recorded())
}

// TestNameOverride: config.tools[].name is the model-facing name.
func TestNameOverride(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := &spy{}
	b.opts.Providers = map[string]provider.Provider{"openai": sp}
	cfg := scripted([]any{ref(lookupID, map[string]any{"name": "find_account"})},
		step(0, map[string]any{"toolCalls": []any{callTo("find_account", map[string]any{})}}),
		step(1, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}),
	)
	h := b.handler(t, cfg)
	sp.next = h.provider
	h.provider = sp
	_, _, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Len(t, b.env.recorded(), 1)
	specs := sp.requests()[0].Tools
	require.Equal(t, "find_account", specs[0].Name)
	require.Equal(t, "Look an account up.", specs[0].Description)
	require.Equal(t, toolReportOutcome, specs[1].Name)
	require.Len(t, specs, 2) // no run_code unless programmatic
}

// gatedConfig has lookup plain and send_money gated with fixed input.
func gatedConfig(script ...any) map[string]any {
	return scripted([]any{
		ref(lookupID, nil),
		ref(sendID, map[string]any{"approval": "REQUIRED", "input": map[string]any{"currency": "EUR"}}),
	}, script...)
}

// TestGatedCallWaits: a call of a gated tool ends the turn WAITING with
// the approval listed (P1); the interrupt id is derived from the
// execution and the call, so a retried attempt names the same one.
func TestGatedCallWaits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"text": "Sending.", "toolCalls": []any{callTo("lookup", map[string]any{"q": "x"}), callTo("send_money", map[string]any{"amount": 5, "currency": "USD"})}}),
	))
	req := b.request()
	out, rec, err := run(t, h, req)
	require.NoError(t, err)
	require.Equal(t, "WAITING", out.Status)
	require.Equal(t, "waiting for approval of 1 tool call(s)", out.Reason)
	require.JSONEq(t, string(req.State), string(out.State))
	require.NotEmpty(t, out.Resume)
	require.Len(t, out.Approvals, 1)
	a := out.Approvals[0]
	require.Equal(t, turns.InterruptIDFor(req.ExecutionID, "call_0_1"), a.InterruptID)
	require.Equal(t, req.ExecutionID, a.ExecutionID)
	require.Equal(t, sendID, a.ToolActionID)
	require.Equal(t, 7, a.ToolVersion)
	require.Equal(t, "send_money", a.ToolName)
	require.Equal(t, "call_0_1", a.CallID)
	require.JSONEq(t, `{"amount":5,"currency":"EUR"}`, string(a.Input))
	// The plain call ran; the gated one did not.
	require.Equal(t, []call{{Action: lookupID.String(), Input: `{"q":"x"}`}}, b.env.recorded())
	require.Equal(t, []string{"input", "model_message", "tool_call", "tool_result", "approval_request", "outcome"}, rec.kinds())
	require.Equal(t, a.InterruptID.String(), rec.of("approval_request")[0]["interrupt_id"])

	again, _, err := run(t, h, req)
	require.NoError(t, err)
	require.Equal(t, out.Approvals, again.Approvals)
	require.JSONEq(t, string(out.Resume), string(again.Resume))
}

// pause runs turn 1 of gatedConfig's script and returns its outcome.
func pause(t *testing.T, b *bundle, h *handler) (*turns.Request, *turns.Outcome) {
	t.Helper()
	req := b.request()
	out, _, err := run(t, h, req)
	require.NoError(t, err)
	require.Equal(t, "WAITING", out.Status)
	return req, out
}

// resumed is turn n taking inputs after a turn that ended with out.
func resumed(b *bundle, out *turns.Outcome, n int, inputs ...turns.InputView) *turns.Request {
	req := b.request()
	req.Turn = n
	req.ExecutionID = uuid.NewSHA1(uuid.NameSpaceOID, []byte{byte(n)})
	req.Resume = out.Resume
	req.Inputs = inputs
	return req
}

// TestApproveRunsTheCall: an approval with a replacement input runs the
// call with the fixed input laid over it, and the turn goes on to its
// outcome (P5).
func TestApproveRunsTheCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"toolCalls": []any{callTo("send_money", map[string]any{"amount": 5})}}),
		step(1, map[string]any{"when": `"sent":{"amount":4,"currency":"EUR"}`, "text": "Sent.", "toolCalls": []any{report("OPEN", "", map[string]any{"sent": 4})}}),
	))
	_, paused := pause(t, b, h)
	require.Empty(t, b.env.recorded())

	req := resumed(b, paused, 2, approval(paused.Approvals[0].InterruptID, "APPROVE", "ok", `{"amount":4,"currency":"USD"}`))
	out, rec, err := run(t, h, req)
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	require.JSONEq(t, `{"sent":4}`, string(out.State))
	require.Equal(t, []call{{Action: sendID.String(), Input: `{"amount":4,"currency":"EUR"}`}}, b.env.recorded())
	require.Equal(t, []string{"note", "approval_response", "tool_call", "tool_result", "model_message", "outcome"}, rec.kinds())
	resp := rec.of("approval_response")[0]
	require.Equal(t, "APPROVE", resp["decision"])
	require.Equal(t, "alice", resp["responder"])
	require.Equal(t, map[string]any{"amount": float64(4), "currency": "USD"}, resp["input"])
}

// TestApproveWithoutInput: without a replacement the model's input runs.
func TestApproveWithoutInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"toolCalls": []any{callTo("send_money", map[string]any{"amount": 5, "currency": "USD"})}}),
		step(1, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}),
	))
	_, paused := pause(t, b, h)
	_, _, err := run(t, h, resumed(b, paused, 2, approval(paused.Approvals[0].InterruptID, "APPROVE", "", "")))
	require.NoError(t, err)
	require.Equal(t, []call{{Action: sendID.String(), Input: `{"amount":5,"currency":"EUR"}`}}, b.env.recorded())
}

// TestDenyIsReported: a denial reaches the model with the reason (P5).
func TestDenyIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"toolCalls": []any{callTo("send_money", map[string]any{"amount": 5})}}),
		step(1, map[string]any{"when": "denied by alice: too risky", "toolCalls": []any{report("OPEN", "", map[string]any{"denied": true})}}),
	))
	_, paused := pause(t, b, h)
	out, rec, err := run(t, h, resumed(b, paused, 2, approval(paused.Approvals[0].InterruptID, "DENY", "too risky", "")))
	require.NoError(t, err)
	require.JSONEq(t, `{"denied":true}`, string(out.State))
	require.Empty(t, b.env.recorded())
	require.Equal(t, []string{"send_money denied by alice: too risky"}, toolResults(rec))
	require.Equal(t, true, rec.of("tool_result")[0]["is_error"])
}

// TestParallelGatedCalls: with two gated calls and one answer, the turn
// waits again listing only the other, under its first interrupt and
// execution ids (P2); the answered call does not run again later.
func TestParallelGatedCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"toolCalls": []any{callTo("send_money", map[string]any{"amount": 1}), callTo("send_money", map[string]any{"amount": 2})}}),
		step(1, map[string]any{"when": "denied by alice", "toolCalls": []any{report("OPEN", "", map[string]any{"done": true})}}),
	))
	req1, paused := pause(t, b, h)
	require.Len(t, paused.Approvals, 2)
	first, second := paused.Approvals[0], paused.Approvals[1]
	require.NotEqual(t, first.InterruptID, second.InterruptID)

	req2 := resumed(b, paused, 2, approval(first.InterruptID, "APPROVE", "", ""))
	again, _, err := run(t, h, req2)
	require.NoError(t, err)
	require.Equal(t, "WAITING", again.Status)
	require.Equal(t, []turns.Approval{second}, again.Approvals)
	require.Equal(t, req1.ExecutionID, again.Approvals[0].ExecutionID)
	require.NotEqual(t, req2.ExecutionID, again.Approvals[0].ExecutionID)
	require.Len(t, b.env.recorded(), 1)

	out, _, err := run(t, h, resumed(b, again, 3, approval(second.InterruptID, "DENY", "", "")))
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	require.Equal(t, []call{{Action: sendID.String(), Input: `{"amount":1,"currency":"EUR"}`}}, b.env.recorded())
}

// TestInputsWhileWaitingAgain: inputs a resumed turn takes while it waits
// again reach the model with the results (nothing it took is lost).
func TestInputsWhileWaitingAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"toolCalls": []any{callTo("send_money", map[string]any{"amount": 1}), callTo("send_money", map[string]any{"amount": 2})}}),
		step(1, map[string]any{"when": "ev-late", "toolCalls": []any{report("OPEN", "", nil)}}),
	))
	_, paused := pause(t, b, h)
	late := b.request().Inputs[0]
	late.Identity = "ev-late"
	again, _, err := run(t, h, resumed(b, paused, 2, approval(paused.Approvals[0].InterruptID, "DENY", "", ""), late))
	require.NoError(t, err)
	require.Equal(t, "WAITING", again.Status)
	out, rec, err := run(t, h, resumed(b, again, 3, approval(paused.Approvals[1].InterruptID, "DENY", "", "")))
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	// The approval answers are applied, not listed: the list holds the
	// event alone.
	text := rec.of("input")[0]["text"].(string)
	require.True(t, strings.HasPrefix(text, "New inputs (oldest first):\n{"), text)
	require.Equal(t, 1, strings.Count(text, "\n"), text)
	require.Contains(t, text, `"identity":"ev-late"`)
	require.NotContains(t, text, `"kind":"COMMAND"`)
}

// TestRetryOfApprovalResumedTurn: a retry of a held approval-resumed turn
// (H3) runs the approved call again and shows the note with its result.
func TestRetryOfApprovalResumedTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp := &spy{}
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"toolCalls": []any{callTo("send_money", map[string]any{"amount": 5})}}),
		step(1, map[string]any{"when": "Note from the responder: reviewed, go on", "toolCalls": []any{report("OPEN", "", map[string]any{"retried": true})}}),
	))
	sp.next, h.provider = h.provider, sp
	_, paused := pause(t, b, h)

	cmd := approval(paused.Approvals[0].InterruptID, "APPROVE", "", "")
	req := resumed(b, paused, 3, retry("reviewed, go on"))
	req.Replayed = []turns.InputView{cmd}
	out, _, err := run(t, h, req)
	require.NoError(t, err)
	require.JSONEq(t, `{"retried":true}`, string(out.State))
	require.Equal(t, []call{{Action: sendID.String(), Input: `{"amount":5,"currency":"EUR"}`}}, b.env.recorded())
	reqs := sp.requests()
	last := reqs[len(reqs)-1].Messages
	msg := last[len(last)-1]
	require.Equal(t, provider.RoleUser, msg.Role)
	require.Equal(t, "Note from the responder: reviewed, go on", msg.Text)
	require.Len(t, msg.ToolResults, 1)
	require.Contains(t, msg.ToolResults[0].Content, `"sent"`)
}

// TestRetryOfHeldTurn: a retry of a held turn (no approvals) shows the
// replayed inputs, then the note (H3).
func TestRetryOfHeldTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"when": "Note from the responder: try again", "toolCalls": []any{report("OPEN", "", nil)}}))
	req := b.request()
	req.Replayed, req.Inputs = req.Inputs, []turns.InputView{retry("try again")}
	out, rec, err := run(t, h, req)
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	text := rec.of("input")[0]["text"].(string)
	require.Contains(t, text, "Inputs of this turn (1, oldest first):\n{\"kind\":\"EVENT\",\"identity\":\"ev-1\"")
	require.Less(t, strings.Index(text, `"identity":"ev-1"`), strings.Index(text, "Note from the responder: try again"))
	require.NotContains(t, text, `"kind":"COMMAND"`, "the RETRY answer shows as its note only")
}

// TestRetryOfARetry: a held retry turn retried again replays the event and
// the first answer; the list counts the event, and both notes follow it
// in order (H3).
func TestRetryOfARetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}))
	req := b.request()
	req.Replayed = append(req.Inputs, retry("first"))
	req.Inputs = []turns.InputView{retry("")}
	_, rec, err := run(t, h, req)
	require.NoError(t, err)
	text := rec.of("input")[0]["text"].(string)
	list := strings.Index(text, "Inputs of this turn (1, oldest first):\n")
	first := strings.Index(text, "\nNote from the responder: first\n")
	second := strings.Index(text, "\nThe responder asked to run this turn again.\n")
	require.True(t, list > 0 && list < first && first < second, text)
}

// TestTurnWithoutInputs: a turn with nothing to list says so.
func TestTurnWithoutInputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}))
	req := b.request()
	req.Inputs = nil
	_, rec, err := run(t, h, req)
	require.NoError(t, err)
	require.Contains(t, rec.of("input")[0]["text"], "This turn has no inputs.\n")
}

// TestFinalTurnCannotWait: in a final turn a gated call gets an error
// result instead of pausing, and requests restored unanswered are reported
// as not answered (E3, E6).
func TestFinalTurnCannotWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ends := testNow
	h := b.handler(t, gatedConfig(
		step(0, map[string]any{"toolCalls": []any{callTo("send_money", map[string]any{"amount": 1}), callTo("send_money", map[string]any{"amount": 2})}}),
		map[string]any{"when": "cannot wait", "toolCalls": []any{report("COMPLETED", "ended", nil)}},
		map[string]any{"when": "not answered", "toolCalls": []any{callTo("send_money", map[string]any{"amount": 3})}},
	))
	_, paused := pause(t, b, h)
	req := resumed(b, paused, 2, approval(paused.Approvals[0].InterruptID, "DENY", "no", ""))
	req.Final, req.EndsAt = true, &ends
	out, rec, err := run(t, h, req)
	require.NoError(t, err)
	require.EqualValues(t, "COMPLETED", out.Status)
	require.Empty(t, out.Approvals)
	require.Empty(t, b.env.recorded())
	results := toolResults(rec)
	require.Len(t, results, 3)
	require.Contains(t, results[0], "denied by alice: no")
	require.Contains(t, results[1], "not answered")
	require.Contains(t, results[2], "the session has ended")
}

// TestRefusalHolds: a refusal ends the attempt as REFUSED with the
// provider's category and explanation (H1, H2).
func TestRefusalHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"text": "I can't help with that.", "refusal": map[string]any{"category": "cyber", "explanation": "policy"}}))
	_, rec, err := run(t, h, b.request())
	hold := turns.AsHold(err)
	require.NotNil(t, hold)
	require.Equal(t, turns.CauseRefused, hold.Cause)
	require.Equal(t, "cyber", hold.Category)
	require.Equal(t, "policy", hold.Explanation)
	require.Equal(t, "I can't help with that.", hold.Message)
	require.Equal(t, []string{"input", "model_message", "refusal"}, rec.kinds())
}

// TestNoOutcomeIsUnfinished: a model that stops without report_outcome is
// reminded once, then the turn is unfinished (H1).
func TestNoOutcomeIsUnfinished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"text": "Thinking out loud."}))
	_, rec, err := run(t, h, b.request())
	hold := turns.AsHold(err)
	require.NotNil(t, hold)
	require.Equal(t, turns.CauseUnfinished, hold.Cause)
	require.False(t, turns.IsPermanent(err))
	require.Equal(t, []string{"input", "model_message", "note", "model_message", "note"}, rec.kinds())

	// The reminder works when the model listens.
	h = b.handler(t, scripted(nil,
		map[string]any{"when": "without calling report_outcome", "toolCalls": []any{report("OPEN", "", nil)}},
		map[string]any{"text": "Done."},
	))
	out, _, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
}

// TestMaxSteps: a model that never reports runs out of maxSteps.
func TestMaxSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := scripted([]any{ref(lookupID, nil)}, map[string]any{"toolCalls": []any{callTo("lookup", map[string]any{})}})
	cfg["maxSteps"] = 3
	h := b.handler(t, cfg)
	_, _, err := run(t, h, b.request())
	require.Equal(t, turns.CauseUnfinished, turns.AsHold(err).Cause)
	require.ErrorContains(t, err, "3 calls (maxSteps)")
	require.Len(t, b.env.recorded(), 3)
}

// TestMaxTotalTokens: the turn stops calling the model once its token
// budget is used.
func TestMaxTotalTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := scripted([]any{ref(lookupID, nil)}, map[string]any{"toolCalls": []any{callTo("lookup", map[string]any{})}})
	cfg["maxTotalTokens"] = 10
	h := b.handler(t, cfg)
	_, _, err := run(t, h, b.request())
	require.Equal(t, turns.CauseUnfinished, turns.AsHold(err).Cause)
	require.ErrorContains(t, err, "maxTotalTokens 10")
	require.Len(t, b.env.recorded(), 1)
}

// TestStatusEnum: report_outcome offers what the turn may report (E2, E3):
// only OPEN before a session's end, only COMPLETED in its final turn, and
// COMPLETED before the end gets an error result.
func TestStatusEnum(t *testing.T) {
	t.Parallel()
	ends := testNow.Add(time.Hour)
	for _, tc := range []struct {
		name  string
		final bool
		ends  *time.Time
		enum  []any
	}{
		{"no end", false, nil, []any{"OPEN", "COMPLETED", "FAILED"}},
		{"before the end", false, &ends, []any{"OPEN"}},
		{"final turn", true, &ends, []any{"COMPLETED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			sp := &spy{}
			h := b.handler(t, scripted(nil, map[string]any{"toolCalls": []any{report(tc.enum[0].(string), "because", nil)}}))
			sp.next, h.provider = h.provider, sp
			req := b.request()
			req.Final, req.EndsAt = tc.final, tc.ends
			out, _, err := run(t, h, req)
			require.NoError(t, err)
			require.Equal(t, tc.enum[0], out.Status)
			var schema struct {
				Properties struct {
					Status struct {
						Enum []any `json:"enum"`
					} `json:"status"`
				} `json:"properties"`
			}
			specs := sp.requests()[0].Tools
			require.Equal(t, toolReportOutcome, specs[len(specs)-1].Name)
			require.NoError(t, json.Unmarshal(specs[len(specs)-1].InputSchema, &schema))
			require.Equal(t, tc.enum, schema.Properties.Status.Enum)
		})
	}

	t.Run("COMPLETED before the end", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := b.handler(t, scripted(nil,
			step(0, map[string]any{"toolCalls": []any{report("COMPLETED", "all done", nil)}}),
			step(1, map[string]any{"when": "keeps the session OPEN", "toolCalls": []any{report("OPEN", "", nil)}}),
		))
		req := b.request()
		req.EndsAt = &ends
		out, rec, err := run(t, h, req)
		require.NoError(t, err)
		require.Equal(t, "OPEN", out.Status)
		require.Contains(t, toolResults(rec)[0], `status "COMPLETED" is not allowed`)
	})

	t.Run("reason required", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := b.handler(t, scripted(nil,
			step(0, map[string]any{"toolCalls": []any{report("FAILED", "", nil)}}),
			step(1, map[string]any{"when": "needs a reason", "toolCalls": []any{report("FAILED", "broken", nil)}}),
		))
		out, _, err := run(t, h, b.request())
		require.NoError(t, err)
		require.EqualValues(t, "FAILED", out.Status)
		require.Equal(t, "broken", out.Reason)
	})
}

// TestCallsAfterOutcomeIgnored: calls after report_outcome in the same
// message do not run.
func TestCallsAfterOutcomeIgnored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted([]any{ref(lookupID, nil)}, map[string]any{"toolCalls": []any{report("OPEN", "", nil), callTo("lookup", map[string]any{})}}))
	out, rec, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	require.Empty(t, b.env.recorded())
	require.Equal(t, []string{"input", "model_message", "outcome", "note"}, rec.kinds())
}

// TestToolErrors: a tool's own error (*fault.Error) is an error result;
// any other error fails the attempt, to be retried (T7).
func TestToolErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.env.tools[lookupID.String()] = func(jsonvalue.Value) (jsonvalue.Value, error) {
		return nil, fault.New(fault.CallFailed, "", "the lookup service said no")
	}
	h := b.handler(t, scripted([]any{ref(lookupID, nil)},
		step(0, map[string]any{"toolCalls": []any{callTo("lookup", map[string]any{}), callTo("nope", map[string]any{})}}),
		step(1, map[string]any{"when": "the lookup service said no", "toolCalls": []any{report("OPEN", "", nil)}}),
	))
	out, rec, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	require.Contains(t, toolResults(rec)[1], `there is no tool named "nope"`)

	b.env.tools[lookupID.String()] = func(jsonvalue.Value) (jsonvalue.Value, error) {
		return nil, errors.New("connection reset")
	}
	_, _, err = run(t, h, b.request())
	require.ErrorContains(t, err, "connection reset")
	require.False(t, turns.IsPermanent(err))
	require.Nil(t, turns.AsHold(err))
}

// TestLongResultIsCut: results over MaxResult are cut and marked.
func TestLongResultIsCut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.env.tools[lookupID.String()] = func(jsonvalue.Value) (jsonvalue.Value, error) {
		return jsonvalue.MustEncode(strings.Repeat("é", MaxResult)), nil
	}
	sp := &spy{}
	h := b.handler(t, scripted([]any{ref(lookupID, nil)},
		step(0, map[string]any{"toolCalls": []any{callTo("lookup", map[string]any{})}}),
		step(1, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}),
	))
	sp.next, h.provider = h.provider, sp
	_, _, err := run(t, h, b.request())
	require.NoError(t, err)
	msgs := sp.requests()[1].Messages
	content := msgs[len(msgs)-1].ToolResults[0].Content
	require.Less(t, len(content), MaxResult+100)
	require.Contains(t, content, "[truncated: the full text is")
	require.True(t, strings.HasPrefix(content, `"éé`))
}

// TestUnresolvableTool: a tool that became inactive after create fails
// the turn for good, naming the reference: in the handler built before
// (the turn resolves its tools) and in New, which the executor calls for
// every turn. A transient lookup error is retried.
func TestUnresolvableTool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := scripted([]any{ref(lookupID, nil), ref(sendID, nil)}, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}})
	h := b.handler(t, cfg)
	b.dir.status[sendID] = "DISABLED"
	_, _, err := run(t, h, b.request())
	require.True(t, turns.IsPermanent(err))
	require.ErrorContains(t, err, "config.tools[1] (tool action "+sendID.String()+") cannot be used: the tool action "+sendID.String()+" is DISABLED")

	raw, jerr := json.Marshal(cfg)
	require.NoError(t, jerr)
	_, err = turns.NewRegistry(Kind(b.opts)).Handler(KindName, turns.Spec{Config: raw})
	require.Equal(t, fault.InvalidConfig, fault.CodeOf(err))
	require.EqualError(t, err, "config.tools[1].action: the tool action "+sendID.String()+" is DISABLED")

	delete(b.dir.status, sendID)
	b.dir.err = errors.New("database is down")
	_, _, err = run(t, h, b.request())
	require.False(t, turns.IsPermanent(err))
	require.ErrorContains(t, err, "database is down")
}

// TestToolItMayNotCallIsNotShown (issue 11): a tool the version may not
// call (its author lost CALL on it) fails the turn for good before the
// directory is asked, so nothing of the tool reaches the model or the
// error; MayCall failing transiently is retried.
func TestToolItMayNotCallIsNotShown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := scripted([]any{ref(lookupID, nil), ref(sendID, nil)}, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}})
	h := b.handler(t, cfg)
	b.env.denied = map[string]bool{sendID.String(): true}
	b.dir.tools[sendID].Name = "secret_name"
	_, rec, err := run(t, h, b.request())
	require.True(t, turns.IsPermanent(err))
	require.ErrorContains(t, err, "config.tools[1] (tool action "+sendID.String()+") cannot be used: not allowed")
	require.NotContains(t, err.Error(), "secret_name")
	require.Empty(t, rec.entries, "the model was not called")
	require.Empty(t, b.env.recorded())

	b.env.denied = nil
	out, _, err := run(t, h, b.request())
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
}

// TestNameClashAtRunTime: a tool renamed after create so that two
// references share a name fails the turn for good.
func TestNameClashAtRunTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted([]any{ref(lookupID, nil), ref(sendID, nil)}, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}))
	b.dir.tools[sendID].Name = "lookup"
	_, _, err := run(t, h, b.request())
	require.True(t, turns.IsPermanent(err))
	require.ErrorContains(t, err, `the name "lookup" is already config.tools[0]'s; set config.tools[1].name`)
}

// failing is a provider that fails.
type failing struct{ err error }

func (f failing) Complete(context.Context, *provider.Request) (*provider.Reply, error) {
	return nil, f.err
}

// TestProviderErrors: a permanent provider error fails the turn at once;
// others are retried (T7).
func TestProviderErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.opts.Providers = map[string]provider.Provider{"anthropic": failing{provider.Permanent(errors.New("bad request"))}}
	h := b.handler(t, map[string]any{"provider": "anthropic", "model": "claude"})
	_, _, err := run(t, h, b.request())
	require.True(t, turns.IsPermanent(err))
	require.ErrorContains(t, err, "model call 1: bad request")

	b.opts.Providers = map[string]provider.Provider{"anthropic": failing{errors.New("overloaded")}}
	h = b.handler(t, map[string]any{"provider": "anthropic", "model": "claude"})
	_, _, err = run(t, h, b.request())
	require.False(t, turns.IsPermanent(err))
	require.Nil(t, turns.AsHold(err))
}

// TestRunThroughTranscript: Run writes into the request's transcript and
// tolerates none.
func TestRunThroughTranscript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}))
	out, err := h.Run(context.Background(), b.request())
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
}

// TestAttemptsPolicy: config.attempts is the handler's policy (T7).
func TestAttemptsPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := scripted(nil, map[string]any{"text": "x"})
	require.Equal(t, DefaultAttempts, b.handler(t, cfg).MaxAttempts())
	cfg["attempts"] = 5
	var p turns.AttemptsPolicy = b.handler(t, cfg)
	require.Equal(t, 5, p.MaxAttempts())
}

// TestDuplicateCallIDs: calls the model gives the same id still get
// distinct interrupts (P2 needs one per call).
func TestDuplicateCallIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dup := func(amount int) map[string]any {
		c := callTo("send_money", map[string]any{"amount": amount})
		c["id"] = "same"
		return c
	}
	h := b.handler(t, gatedConfig(step(0, map[string]any{"toolCalls": []any{dup(1), dup(2)}})))
	_, out := pause(t, b, h)
	require.Len(t, out.Approvals, 2)
	require.Equal(t, "same", out.Approvals[0].CallID)
	require.Equal(t, "call_1_1", out.Approvals[1].CallID)
	require.NotEqual(t, out.Approvals[0].InterruptID, out.Approvals[1].InterruptID)
}

// TestSessionlessEvent (issue 15): without a session the model is shown
// the one event, not a session, turn or state; an OPEN report succeeds.
func TestSessionlessEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.handler(t, scripted(nil, map[string]any{"toolCalls": []any{report("OPEN", "", nil)}}))
	req := b.request()
	req.SessionID, req.Input, req.State, req.Turn = "", nil, nil, 0
	out, rec, err := run(t, h, req)
	require.NoError(t, err)
	require.Equal(t, "OPEN", out.Status)
	input := rec.of("input")[0]["text"].(string)
	require.Contains(t, input, "An event to handle; there is no session")
	require.Contains(t, input, `"type":"entry.inserted"`)
	require.NotContains(t, input, "Session")
}
