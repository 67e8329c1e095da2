// Package demo is the scripted walkthrough behind `actionsledger demo` and
// `make demo`: the seed's fraud monitor over a few accounts, then an agent
// whose gated tool call waits for an approval and whose refused turn is
// held and retried (docs/agents.md). It drives the service in process
// through GraphQL only, with the seed's operations unchanged (SPEC I2),
// and reports anything that does not come out as the walkthrough says.
package demo
