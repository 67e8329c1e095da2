package pgplan_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/pgplan"
)

// Configure sets every setting the URL leaves unset and keeps the URL's.
func TestConfigureKeepsTheURLsSettings(t *testing.T) {
	cfg, err := pgconn.ParseConfig("postgres://u@127.0.0.1:5432/db?sslmode=disable&jit=on")
	require.NoError(t, err)
	pgplan.Configure(cfg)
	require.Equal(t, "on", cfg.RuntimeParams["jit"], "the URL's own")
	require.Equal(t, "off", cfg.RuntimeParams["enable_seqscan"])

	cfg, err = pgconn.ParseConfig("postgres://u@127.0.0.1:5432/db?sslmode=disable")
	require.NoError(t, err)
	pgplan.Configure(cfg)
	for k, v := range pgplan.Settings {
		require.Equal(t, v, cfg.RuntimeParams[k], k)
	}
}
