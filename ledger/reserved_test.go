package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/ledger"
)

// Records in the service's namespaces would append events that pose as
// clock firings (schedule.*) or responses (action_session.*).
func TestReservedNamespaces(t *testing.T) {
	t.Parallel()
	for _, ns := range []string{"schedule", "action_session"} {
		err := ledger.ValidateNamespace(ns, "namespace")
		require.Equal(t, fault.ReservedEventType, fault.CodeOf(err), ns)
	}
	require.NoError(t, ledger.ValidateNamespace("schedules", "namespace"))
}
