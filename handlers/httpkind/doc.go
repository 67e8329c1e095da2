// Package httpkind is the http handler kind: each turn of a session is
// POSTed as JSON to a URL the action configures, and the reply is the turn's
// outcome (T5). A turn handler can thus be written in any language and run
// behind any HTTP server.
//
// # Config
//
//	{"url": "https://example.com/turn",  // required, http or https
//	 "secret": "at least 16 bytes",       // required, signs every request
//	 "timeout_ms": 10000}                 // optional, 1-60000 (default 10000)
//
// The secret is stored with the action definition, in the clear, and is
// read back by anyone who can read the definition. A secret store comes
// with the authorisation layer.
//
// # Request
//
// The body is a JSON object:
//
//	{"action_id", "version", "session_id", "input", "state", "inputs",
//	 "turn", "final", "ends_at", "execution_id", "attempt", "credential"}
//
// with these headers:
//
//	Content-Type: application/json
//	X-Actionsledger-Timestamp: <unix seconds, from the service clock>
//	X-Actionsledger-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed by the secret>
//	X-Actionsledger-Execution: <execution id>
//
// Every retry of a turn carries the same execution id (T7), so a receiver
// can deduplicate retries by it; the body's attempt counts them. A receiver
// checks a request with [Verify].
//
// # Reply
//
// A 2xx reply whose body is a JSON object {"state", "status", "output",
// "reason"} (status required; reason required for COMPLETED and FAILED; no
// other keys, at most 1 MiB). Anything else in a 2xx reply fails the turn
// at once with an error starting "action_output_invalid:".
//
// A 5xx or 429 reply, a timeout and a connection error fail the attempt;
// the executor retries it with the same request (T7) until its attempts run
// out. Any other status (other 4xx, 1xx, 3xx: redirects are not followed)
// fails the turn at once.
//
// # Credential
//
// "credential" is a bearer token for calling back into the service while
// the turn runs (T10): POST /graphql with Authorization: Bearer
// <credential> may read this session, its turns and its inputs, through
// actions { action(id: <action_id>) { session(id: <session_id>) { ... } } },
// and nothing else. It stops working when the turn commits, fails or is
// cancelled, or its lease is lost.
package httpkind
