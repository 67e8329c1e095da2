package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/cli"
)

// Issue 15 CLI: executions list (human and JSON, --status) and retry.
func TestExecutionsListAndRetry(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	const id = "7b1d6c1e-1f0a-4c55-9e0b-6d0c3f2a5e15"
	r.runIn(t, `{"id": "`+id+`", "name": "payments", "kind": "starlark",
		"source": "def turn(event):\n    ev = event[\"inputs\"][0][\"event\"]\n    if ev[\"data\"][\"amount\"] < 0:\n        fail(\"negative amount\")\n    return {\"output\": {\"amount\": ev[\"data\"][\"amount\"]}}\n",
		"triggers": [{"name": "paid", "event": "event.type == \"payment.made\""}]}`, "apply", "-f", "-")
	r.ok(t, "append", "payment.made", `{"amount": 12.50}`)
	r.ok(t, "append", "payment.made", `{"amount": -1}`)
	r.ok(t, "append", "other.thing", `{"amount": 1}`)
	r.step(t)

	out := r.ok(t, "executions", "list", id)
	require.Regexp(t, `(?m)^ID\s+STATUS\s+ATTEMPTS\s+EVENT\s+TRIGGERS\s+KEY\s+FINISHED\s+OUTPUT OR ERROR$`, out)
	require.Regexp(t, `(?m)^\S+\s+FAILED\s+1\s+payment.made @\d+\s+paid\s+.*negative amount`, out)
	require.Regexp(t, `(?m)^\S+\s+SUCCEEDED\s+1\s+payment.made @\d+\s+paid\s+.*\{"amount":12.5\}`, out) // Starlark reads 12.50 as a float

	type node struct {
		ID, Status string
		Attempts   int
		Retries    int
		Event      struct{ EventType string }
		Triggers   []struct{ Name string }
	}
	var failed []node
	r.okJSON(t, &failed, "executions", "list", id, "--status", "failed")
	require.Len(t, failed, 1)
	require.Equal(t, "paid", failed[0].Triggers[0].Name)
	var all []node
	r.okJSON(t, &all, "executions", "list", id, "--limit", "0")
	require.Len(t, all, 2, "one per matching event")

	var retried struct {
		ID, Status, RetriedBy string
		Retries               int
	}
	r.okJSON(t, &retried, "executions", "retry", id, failed[0].ID)
	require.Equal(t, failed[0].ID, retried.ID)
	require.Equal(t, "QUEUED", retried.Status)
	require.Equal(t, 1, retried.Retries)
	require.Equal(t, "dev", retried.RetriedBy)
	r.step(t)
	r.okJSON(t, &failed, "executions", "list", id, "--status", "FAILED")
	require.Len(t, failed, 1, "the same event fails the same way")
	require.Equal(t, 2, failed[0].Attempts)
	require.Equal(t, 1, failed[0].Retries)

	var ok []node
	r.okJSON(t, &ok, "executions", "list", id, "--status", "SUCCEEDED")
	r.fails(t, cli.ExitRefused, []string{"executions", "retry", id, ok[0].ID}, "EXECUTION_NOT_RETRYABLE")
	r.fails(t, cli.ExitNotFound, []string{"executions", "retry", id, "00000000-0000-4000-8000-000000000000"}, "NOT_FOUND")
	r.fails(t, cli.ExitNotFound, []string{"executions", "list", "00000000-0000-4000-8000-000000000000"}, "NOT_FOUND")
	r.fails(t, cli.ExitUsage, []string{"executions", "list", id, "--status", "done"}, "one of QUEUED")
}
