// Package echo is the agent.echo handler kind: a stand-in agent that
// answers every turn by echoing the inputs it saw. It keeps a running count
// of inputs in the session state and writes one transcript entry per input
// plus one for its reply. It keeps the session OPEN, except in the final
// turn of a session with an end, which it completes (E3). Useful for demos,
// tests and wiring checks.
//
// Config: {"agent_id": string (optional, at most 200 bytes),
// "sleep_ms": integer 0-60000 (optional; how long each turn takes)}.
package echo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// KindName is the kind actions name.
const KindName = "agent.echo"

// MaxSleep is the longest sleep_ms accepted.
const MaxSleep = 60 * time.Second

// Config is the kind's configuration.
type Config struct {
	AgentID string `json:"agent_id"`
	SleepMS int64  `json:"sleep_ms"`
}

// Kind returns the kind for a turns.Registry.
func Kind() turns.Kind {
	return turns.Kind{Name: KindName, New: func(spec turns.Spec) (turns.Handler, error) {
		raw := spec.Config
		if spec.Source != nil {
			return nil, fault.New(fault.InvalidConfig, "source", "agent.echo runs no source")
		}
		var cfg Config
		if len(raw) > 0 && string(raw) != "null" {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cfg); err != nil {
				return nil, fault.New(fault.InvalidConfig, "config", "agent.echo takes {agent_id: string, sleep_ms: integer from 0 to %d} and nothing else", MaxSleep.Milliseconds())
			}
		}
		if len(cfg.AgentID) > 200 {
			return nil, fault.New(fault.InvalidConfig, "config.agent_id", "at most 200 bytes")
		}
		if cfg.SleepMS < 0 || time.Duration(cfg.SleepMS)*time.Millisecond > MaxSleep {
			return nil, fault.New(fault.InvalidConfig, "config.sleep_ms", "sleep_ms is 0-%d", MaxSleep.Milliseconds())
		}
		return &handler{cfg: cfg}, nil
	}}
}

type handler struct{ cfg Config }

type state struct {
	Count    int64 `json:"count"`
	LastTurn int   `json:"last_turn"`
}

type echoed struct {
	Identity  string          `json:"identity"`
	Kind      string          `json:"kind"`
	EventType string          `json:"event_type,omitempty"`
	Data      jsonvalue.Value `json:"data,omitempty"`
}

// Run echoes the turn's inputs; it never fails except on a cancelled context.
func (h *handler) Run(ctx context.Context, req *turns.Request) (*turns.Outcome, error) {
	if h.cfg.SleepMS > 0 {
		t := time.NewTimer(time.Duration(h.cfg.SleepMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	var st state
	if len(req.State) > 0 && string(req.State) != "null" {
		if err := json.Unmarshal(req.State, &st); err != nil {
			return nil, turns.Permanent(fmt.Errorf("agent.echo: state is not its own: %w", err))
		}
	}
	seen := make([]echoed, len(req.Inputs))
	for i, in := range req.Inputs {
		e := echoed{Identity: in.Identity, Kind: string(in.Kind)}
		if in.Event != nil {
			e.EventType, e.Data = in.Event.Type, in.Event.Data
		}
		seen[i] = e
		req.Transcript.Add("input", e)
	}
	st.Count += int64(len(req.Inputs))
	st.LastTurn = req.Turn
	out := map[string]any{"agent_id": h.cfg.AgentID, "turn": req.Turn, "inputs": seen, "count": st.Count}
	req.Transcript.Add("reply", map[string]any{"agent_id": h.cfg.AgentID, "text": fmt.Sprintf("echoed %d input(s)", len(seen))})
	outcome := &turns.Outcome{
		State:  jsonvalue.MustEncode(st),
		Status: "OPEN",
		Output: jsonvalue.MustEncode(out),
	}
	if req.Final {
		// E3: the final turn of a session with an end completes it.
		outcome.Status, outcome.Reason = "COMPLETED", fmt.Sprintf("final turn: echoed %d input(s) at the session's end", len(seen))
	}
	return outcome, nil
}
