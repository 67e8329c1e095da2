// Package cli holds the actionsledger command line's client commands
// (issue 12, CLI): apply, actions, sessions, executions (issue 15), inbox,
// respond, events, put, append and tokens, and mcp, the stdio bridge to the
// server's MCP endpoint (issue 17). They are clients of a running server
// (package client; mcp speaks MCP to /mcp), never database clients; cmd/actionsledger wires them next to the
// server and database commands (serve, worker, migrate, token, ...).
//
// Every command takes --server (ACTIONSLEDGER_SERVER, default
// http://127.0.0.1:8080, with or without /graphql), --token
// (ACTIONSLEDGER_TOKEN) and -o table|json. Tables go to standard output,
// messages and errors to standard error. With -o json a command prints one
// JSON document, and a stream (sessions watch, events tail) one JSON
// document per line; errors then go to standard error as one JSON object
// {"error": {...}}.
//
// Exit codes, which scripts may rely on (see Exit* and ExitCode):
//
//	0  done
//	1  usage: bad flags or arguments, an unreadable or invalid file or JSON
//	   argument (and any failure of the database commands)
//	2  the server refused: a GraphQL error with a code, printed (FORBIDDEN,
//	   INVALID_ACTION, ALREADY_ANSWERED, NOT_IMPLEMENTED, ...)
//	3  no GraphQL answer: the server cannot be reached, the connection broke,
//	   or what answered is not a GraphQL server
//	4  not found: the action, session, interrupt or token does not exist
//	   (a null answer, or the code NOT_FOUND)
//	130 interrupted (SIGINT or SIGTERM) before the answer arrived; the
//	   streams (sessions watch, events tail) exit 0 when stopped so
//
// docs/cli.md is the reference.
package cli
