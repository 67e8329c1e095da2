package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/cli"
)

// Issue 11: the README tutorial's documents (examples/*.yaml) go through
// apply (which reads the action, then creates or updates it: READ and
// WRITE on it) unchanged with AUTH on, as a principal holding what they need and
// no more (not an admin): the monitor, the tool and the agent are stored,
// their sessions run, and the agent's approval is answered. A principal
// lacking one grant (the tool's frozen namespace) cannot store the tool.
func TestTutorialWithGrantsUnderAuth(t *testing.T) {
	t.Parallel()
	r := newRig(t, true)
	const (
		monitor = "4f1c2a7e-9b3d-4e6f-8a21-5c7d9e0b1f34"
		tool    = "2f9b7c3a-1d4e-4f5a-8b6c-7d8e9f0a1b2c"
		agent   = "6a0c2d6e-8f1b-4c1a-9e2d-3b4c5d6e7f80"
		acct1   = "3f0c9f8e-0000-4000-8000-000000000001"
		acct2   = "3f0c9f8e-0000-4000-8000-000000000002"
	)
	doc := func(id string) string { return "financial.Action.document:" + id }
	policies := []string{
		"WRITE=" + doc(monitor), "READ=" + doc(monitor), // apply, sessions get
		"WRITE=" + doc(tool), "READ=" + doc(tool), // apply (which reads the action first); WRITE covers CALL, which the agent's reference needs
		"WRITE=" + doc(agent), "READ=" + doc(agent), "RESPOND=" + doc(agent), // apply, inbox, respond
		"READ=ledger:account", "READ=ledger:entry", // the triggers' event types
		"WRITE=ledger:account", "WRITE=ledger:entry", // put
		"WRITE=ledger:frozen", // the tool's permissions.write
	}
	token := func(principal string, pols []string) []string {
		args := []string{"--token", adminToken, "tokens", "create", principal}
		for _, p := range pols {
			args = append(args, "--policy", p)
		}
		return []string{"--token", strings.TrimSpace(r.ok(t, args...))}
	}
	tutor := token("tutor", policies)
	as := func(args ...string) string {
		t.Helper()
		return r.ok(t, append(tutor, args...)...)
	}

	// Steps 2-3: the monitor counts an account's entries.
	require.Contains(t, as("apply", "-f", "../examples/monitor.yaml"), "created: version 1")
	as("put", "account", acct1, `{"account_id": "`+acct1+`"}`)
	as("put", "entry", "e1", `{"account_id": "`+acct1+`", "amount": 120}`)
	as("put", "entry", "e2", `{"account_id": "`+acct1+`", "amount": 75}`)
	r.step(t)
	var mon struct {
		Status string
		State  map[string]any
	}
	r.okJSON(t, &mon, append(tutor, "sessions", "get", monitor, acct1)...)
	require.Equal(t, "OPEN", mon.Status)
	require.Equal(t, "2", mon.State["count"].(interface{ String() string }).String())

	// Without WRITE on frozen the tool cannot be stored (its code writes there).
	short := token("short", slicesWithout(policies, "WRITE=ledger:frozen"))
	r.fails(t, cli.ExitRefused, append(short, "apply", "-f", "../examples/freeze-tool.yaml"), "FORBIDDEN", "permissions.write[0]")

	// Step 5: the tool and the agent; an entry; the approval from the inbox.
	require.Contains(t, as("apply", "-f", "../examples/freeze-tool.yaml"), "created: version 1")
	require.Contains(t, as("apply", "-f", "../examples/agent.yaml"), "created: version 1")
	require.Contains(t, as("apply", "-f", "../examples/agent.yaml"), "unchanged: version 1")
	as("put", "account", acct2, `{"account_id": "`+acct2+`"}`)
	as("put", "entry", "e4", `{"account_id": "`+acct2+`", "amount": 12000}`)
	r.step(t)
	var items []struct{ InterruptID string }
	r.okJSON(t, &items, append(tutor, "inbox")...)
	require.Len(t, items, 1)
	as("respond", agent, acct2, items[0].InterruptID, "--approve", "--reason", "Confirmed with the customer.")
	r.step(t)
	var ag struct {
		Status string
		State  map[string]any
	}
	r.okJSON(t, &ag, append(tutor, "sessions", "get", agent, acct2)...)
	require.Equal(t, "OPEN", ag.Status)
	require.Equal(t, true, ag.State["frozen"])
	var reason string
	require.NoError(t, r.app.Pool.QueryRow(t.Context(), `SELECT value->>'reason' FROM kv_values WHERE namespace = 'frozen' AND key = $1`, acct2).Scan(&reason))
	require.Equal(t, "large entry", reason, "the approved call wrote its record")
}

func slicesWithout(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}
