package server_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/server"
)

// TestDocsAgentWalkthrough runs the agent walkthrough of docs/agents.md as
// written (its GraphQL and Starlark blocks, in order), so the page stays
// true (P1-P3, H1-H3: an approval, then a held turn retried).
func TestDocsAgentWalkthrough(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/agents.md")
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, "## Walkthrough: an approval, then a held turn")
	end := strings.Index(doc, "## The rules")
	require.True(t, start > 0 && end > start, "the walkthrough section of docs/agents.md moved")
	section := doc[start:end]
	blocks := regexp.MustCompile("(?s)```graphql\n(.*?)```").FindAllStringSubmatch(section, -1)
	source := regexp.MustCompile("(?s)```python\n(.*?)```").FindStringSubmatch(section)
	require.Len(t, blocks, 5, "tool, agent, account and entry, approvals query, suspicious entry")
	require.NotNil(t, source)

	e := newSteppedEnv(t, server.Config{})
	tool, agent := uuid.NewString(), uuid.NewString()
	e.ok(t, blocks[0][1], map[string]any{"id": tool, "source": source[1]}, nil)
	e.ok(t, blocks[1][1], map[string]any{"id": agent, "tool": tool}, nil)
	e.ok(t, blocks[2][1], nil, nil)
	e.step(t)
	var waiting struct {
		Actions struct {
			Action struct {
				Session struct {
					Status    string
					Approvals []struct {
						InterruptID string
						Tool        string
						Input       json.RawMessage
					}
				}
			}
		}
	}
	e.ok(t, blocks[3][1], map[string]any{"a": agent}, &waiting)
	s := waiting.Actions.Action.Session
	require.Equal(t, "WAITING", s.Status)
	require.Len(t, s.Approvals, 1)
	require.Equal(t, "freeze_account", s.Approvals[0].Tool)
	e.ok(t, example(t, "approve.graphql"), map[string]any{"actionId": agent, "interruptId": s.Approvals[0].InterruptID}, nil)
	e.step(t)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM kv_values WHERE namespace = 'frozen' AND key = '3f0c9f8e'`))

	e.ok(t, blocks[4][1], nil, nil)
	e.step(t)
	held := e.agentSession(t, agent)
	require.Equal(t, "WAITING", held.Status)
	hold := held.turnN(t, 3).Execution.Invocation.Hold
	require.NotNil(t, hold)
	require.Equal(t, "REFUSED", hold.Cause)
	e.ok(t, example(t, "retry_held_turn.graphql"), map[string]any{"actionId": agent, "interruptId": hold.InterruptID}, nil)
	e.step(t)
	done := e.agentSession(t, agent)
	require.Equal(t, "OPEN", done.Status)
	require.JSONEq(t, `{"reviewed":true}`, string(done.State))
}
