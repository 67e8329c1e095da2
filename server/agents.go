package server

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/handlers/agent"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// toolDirectory resolves an agent's tool references over the action store
// (the store is set once built: it needs the kinds to validate actions).
type toolDirectory struct {
	actions *action.Store
}

// Tool returns the tool action's current version. Errors: fault.NotFound,
// fault.ActionInactive, fault.NotATool.
func (d *toolDirectory) Tool(ctx context.Context, id uuid.UUID) (*agent.ToolInfo, error) {
	if d.actions == nil {
		return nil, fault.New(fault.NotFound, "", "no tool action %s", id)
	}
	a, err := d.actions.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fault.New(fault.NotFound, "", "no tool action %s", id)
	}
	if a.Status != action.StatusActive {
		return nil, fault.New(fault.ActionInactive, "", "the tool action %s is %s", id, a.Status)
	}
	comp, err := d.actions.Compiled(ctx, a.ID, a.CurrentVersion)
	if err != nil {
		return nil, err
	}
	t := comp.Def.Tool
	if t == nil {
		// No name: the reference may point at an action its author may not read.
		return nil, fault.New(fault.NotATool, "", "action %s is not a tool", id)
	}
	info := &agent.ToolInfo{ActionID: a.ID, Version: a.CurrentVersion, Name: t.Name, InputSchema: json.RawMessage(t.InputSchema),
		Approval: comp.Tool != nil && comp.Tool.Approval}
	if t.Description != nil {
		info.Description = *t.Description
	}
	return info, nil
}
