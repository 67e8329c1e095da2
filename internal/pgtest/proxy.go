package pgtest

import (
	"testing"

	"github.com/actionsledger/actionsledger/internal/pgproxy"
)

// Proxy is a TCP proxy in front of PostgreSQL that counts round trips (see
// package pgproxy), so a test can tell how many statements an operation
// costs (issue 12: the inbox's bounded queries; issue 14: the session
// query).
type Proxy = pgproxy.Proxy

// NewProxy starts a proxy to the server of dsn (a database from NewDB),
// closed when t ends. dsn must not use SSL (the proxy reads the protocol).
func NewProxy(t testing.TB, dsn string) *Proxy {
	t.Helper()
	p, err := pgproxy.Start(dsn)
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}
