// Package examples holds the GraphQL operations printed in seed 004, byte
// for byte (SPEC I2: real client input that must run unchanged), and one
// built from its fragments. They are kept here once: the server's
// end-to-end tests, the demo, the chaos run and GraphiQL's examples all
// read these files.
package examples

import "embed"

// The seed's operations.
var (
	//go:embed create_monitor.graphql
	CreateMonitor string
	//go:embed session_query.graphql
	SessionQuery string
	//go:embed approve.graphql
	Approve string
	//go:embed retry_held_turn.graphql
	RetryHeldTurn string
)

// FS holds every file: the operations above, the seed's two fragments of a
// createAction input (session_block_with_end_and_clock.graphql-fragment,
// tool_with_session.graphql-fragment) and create_monitor_with_end_and_clock.graphql,
// the monitor with the first fragment in place.
//
//go:embed *.graphql *.graphql-fragment
var FS embed.FS
