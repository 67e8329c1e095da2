package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 15, T9 CLI: executions replay shows how a replay's outcome
// differs; actions dry-run shows what a definition would have done.
func TestExecutionsReplayAndDryRun(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	const id = "5c2e7a4b-8d1f-4e3a-9b6c-0f1e2d3c4b5a"
	doc := `{"id": "` + id + `", "name": "payments", "kind": "starlark",
		"source": "def turn(event):\n    ev = event[\"inputs\"][0][\"event\"]\n    return {\"output\": {\"amount\": ev[\"data\"][\"amount\"]}}\n",
		"triggers": [{"name": "paid", "event": "event.type == \"payment.made\""}]}`
	r.runIn(t, doc, "apply", "-f", "-")
	r.ok(t, "append", "payment.made", `{"amount": 12}`)
	r.ok(t, "append", "payment.made", `{"amount": 30}`)
	r.step(t)
	var xs []struct{ ID string }
	r.okJSON(t, &xs, "executions", "list", id)
	require.Len(t, xs, 2)

	out := r.ok(t, "executions", "replay", id, xs[0].ID)
	require.Regexp(t, `(?m)^replay \S+ of `+xs[0].ID+`: SUCCEEDED$`, out)
	require.Contains(t, out, "the same outcome as the original")

	out = r.runIn(t, doc, "actions", "dry-run", "-f", "-", "--from", "1").String()
	require.Regexp(t, `(?m)^positions 1-\d+: \d+ events read in \d+ ms$`, out)
	require.Contains(t, out, "executions: 2")
	require.Regexp(t, `(?m)^paid\s+2\s+0\s+0\s+0\s+2$`, out)

	res := r.runIn(t, doc, "actions", "dry-run", "-f", "-", "--from", "x")
	require.NotZero(t, res.code, "%s", res)
	require.Contains(t, res.String(), "from is a ledger position")
}
