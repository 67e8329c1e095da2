package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Issue 10 item 7: the presenter tells a database that cannot be reached
// (UNAVAILABLE) and a request out of time (TIMEOUT) from a bug (INTERNAL),
// and marks the first two retryable; a server error about the request
// itself stays INTERNAL.
func TestPresenterClassifiesOutages(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	_, refused := pgconn.Connect(context.Background(), "postgres://u@127.0.0.1:1/x?connect_timeout=5")
	var ce *pgconn.ConnectError
	require.ErrorAs(t, refused, &ce)
	for _, tc := range []struct {
		name string
		err  error
		code string
	}{
		{"connect refused", fmt.Errorf("acquire: %w", refused), fault.Unavailable},
		{"net error", fmt.Errorf("ledger: append: %w", dial), fault.Unavailable},
		{"connection ended mid-message", fmt.Errorf("events: %w", io.ErrUnexpectedEOF), fault.Unavailable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, fault.Unavailable},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, fault.Unavailable},
		{"starting up", &pgconn.PgError{Code: "57P03"}, fault.Unavailable},
		{"connection exception", &pgconn.PgError{Code: "08006"}, fault.Unavailable},
		{"too many connections", &pgconn.PgError{Code: "53300"}, fault.Unavailable},
		{"pool closed", fmt.Errorf("acquire: %w", puddle.ErrClosedPool), fault.Unavailable},
		{"internal fault wrapping an outage", &fault.Error{Code: fault.Internal, Message: "x", Err: dial}, fault.Unavailable},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), fault.Timeout},
		{"cancelled", context.Canceled, fault.Timeout},
		{"syntax error", &pgconn.PgError{Code: "42601"}, fault.Internal},
		{"unique violation", &pgconn.PgError{Code: "23505"}, fault.Internal},
		{"plain bug", errors.New("nil map"), fault.Internal},
		{"client fault", fault.New(fault.NotFound, "id", "no such action"), fault.NotFound},
	} {
		ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, graphql.DefaultRecover)
		got := presenter(slog.New(slog.DiscardHandler))(ctx, tc.err)
		require.Equal(t, tc.code, got.Extensions["code"], tc.name)
		if fault.Retryable(tc.code) {
			require.Equal(t, true, got.Extensions["retryable"], tc.name)
		} else {
			require.NotContains(t, got.Extensions, "retryable", tc.name)
		}
		if tc.code == fault.Internal {
			require.Equal(t, "internal error", got.Message, "%s: no database text leaks", tc.name)
		}
	}
}
