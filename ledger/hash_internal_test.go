package ledger

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// goldenHashCases are requests whose idempotency hashes are stored: the
// hashes below were computed by the release that decoded and re-encoded
// each value, and must never change (L3: a retried request finds its first
// result across upgrades).
var goldenHashCases = []struct {
	op   string
	req  []any
	hash string
}{
	{opPut, []any{"entry", "k1", jsonvalue.Value(`{"account_id": "acct-7", "amount": 12}`)}, "1d508dbd08d7b2e80ef69acf6b1cfd7f22e7f69045b13a18f2f15083953d293e"},
	{opPut, []any{"entry", "k1", jsonvalue.Value(` {"amount":12 , "account_id":"acct-7"} `)}, "1d508dbd08d7b2e80ef69acf6b1cfd7f22e7f69045b13a18f2f15083953d293e"},
	{opAppend, []any{"order.placed", jsonvalue.Value(`{"b":[1,2.50,-0,1e400],"a":"caf\u00e9 \u2028 <&>","a":"last"}`)}, "eaaa86771c7e1e132414c108c04d38a98f645a7846102b6dc76cbfb7a59ce791"},
	{opAppend, []any{"note.made", jsonvalue.Value(``)}, "effa0ce4e5266b3d2039f38791a05206c35ff285727b7e3caff52164a120b88b"},
	{opAppend, []any{"note.made", jsonvalue.Value(`not json`)}, "effa0ce4e5266b3d2039f38791a05206c35ff285727b7e3caff52164a120b88b"},
	{opPut, []any{"n", "deep", jsonvalue.Value(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`)}, "3c683fe647acecf5d9cfaf3ef43709cbd95170297213148cc320beb172c01930"},
}

func TestRequestHashIsStable(t *testing.T) {
	t.Parallel()
	for i, c := range goldenHashCases {
		require.Equal(t, c.hash, requestHash(c.op, c.req), "case %d", i)
	}
}
