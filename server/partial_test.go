package server_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// L3: fields of one mutation run in order, each committing on its own; a
// failed field does not hide the ones before it that committed.
func TestMutationFieldsFailAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(t, `mutation { ledger {
	  a: putValue(namespace: "multi", key: "k", value: "first") { version }
	  b: putValue(namespace: "bad ns", key: "k", value: "x") { version }
	  c: putValue(namespace: "multi", key: "k", value: "third") { version }
	} }`, nil)
	requireError(t, r, "BAD_USER_INPUT", "namespace")
	var data struct {
		Ledger struct {
			A, B, C *struct{ Version json.Number }
		}
	}
	require.NoError(t, json.Unmarshal(r.Data, &data), "data: %s", r.Data)
	require.NotNil(t, data.Ledger.A)
	require.Nil(t, data.Ledger.B)
	require.NotNil(t, data.Ledger.C)
	require.Equal(t, "1", data.Ledger.A.Version.String())
	require.Equal(t, "2", data.Ledger.C.Version.String(), "in document order")
}
