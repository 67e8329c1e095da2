// Package client is a typed GraphQL client of the actionsledger API (issue
// 12, CLI; docs/cli.md). The CLI uses it, and so can end-to-end tests and
// other Go programs; it never touches the database.
//
// The operations live in *.graphql files beside this one; genqlient
// (github.com/Khan/genqlient) turns them, with the server's schema.graphqls,
// into generated.go: one function per operation and a Go type per selection.
// Run `go generate ./client` (or `make generate`) after changing either, and
// commit the result.
//
// Queries and mutations: a *Client is the graphql.Client the generated
// functions take. It POSTs each operation to the server's /graphql endpoint
// with the bearer token, if any. An answer with GraphQL errors comes back as
// a *ResponseError whose entries keep extensions.code, extensions.field and
// extensions.retryable; no GraphQL answer at all (the server cannot be
// reached, the connection broke, or what answered is not a GraphQL server)
// is a *TransportError. Data the server did return alongside errors (the
// ledger mutations' fields commit one by one) is still filled in.
//
// Subscriptions: FollowLedgerEvents and FollowSessionUpdates open a
// subscription over server-sent events (POST with Accept: text/event-stream,
// the graphql-sse "distinct connections" mode that gqlgen's SSE transport
// speaks) and return a *Stream. The transport implements genqlient's
// graphql.WebSocketClient interface, so the generated subscription
// functions are used as they are.
package client

//go:generate go tool genqlient
