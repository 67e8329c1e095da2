package observe

import "go.opentelemetry.io/otel/attribute"

// Span attributes of the service's own spans (issue 12;
// docs/observability.md lists which span carries which).
const (
	ExecutionID   = attribute.Key("actionsledger.execution.id")
	ActionID      = attribute.Key("actionsledger.action.id")
	ActionVersion = attribute.Key("actionsledger.action.version")
	ActionKind    = attribute.Key("actionsledger.action.kind")
	SessionID     = attribute.Key("actionsledger.session.id")
	TurnNumber    = attribute.Key("actionsledger.turn")
	Attempt       = attribute.Key("actionsledger.attempt")
	Outcome       = attribute.Key("actionsledger.outcome")
	Inputs        = attribute.Key("actionsledger.inputs")
	Events        = attribute.Key("actionsledger.events")
	FromPosition  = attribute.Key("actionsledger.position.from")
	ToPosition    = attribute.Key("actionsledger.position.to")
	ToolName      = attribute.Key("actionsledger.tool.name")
	CallDepth     = attribute.Key("actionsledger.call.depth")
	Provider      = attribute.Key("actionsledger.model.provider")
	Model         = attribute.Key("actionsledger.model.name")
	Step          = attribute.Key("actionsledger.model.step")
	InputTokens   = attribute.Key("actionsledger.model.input_tokens")
	OutputTokens  = attribute.Key("actionsledger.model.output_tokens")
	ErrorCode     = attribute.Key("actionsledger.error.code")
)
