package jsonvalue_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/jsonvalue"
)

// slowCanonical is what Canonical must equal: Encode(Decode(raw)).
func slowCanonical(raw []byte) ([]byte, error) {
	d, err := jsonvalue.Decode(raw)
	if err != nil {
		return nil, err
	}
	return jsonvalue.Encode(d)
}

var canonicalSeeds = []string{
	`{"account_id":"acct-7","amount":12}`,
	` { "b" : [1, 2.50, -0, 1e400, {"z":null,"a":true}] , "a" : "x" } `,
	`{"a":1,"a":2}`, `{"a ":1,"a":2}`, `{"a!":1,"a":2,"":3}`,
	`"\u2028"`, `"caf\u00e9"`, `"café"`, `"a\"b"`, `"<&>"`, "\"\x7f\"",
	`[]`, `{}`, `null`, `[1,]`, `{"a":1,}`, `01`, `1.`, `-`, `1e`, `{"a"}`, `[1 2]`, `1 2`, ``, `tru`,
	strings.Repeat("[", 70) + strings.Repeat("]", 70),
	`{"n":123456789012345678901234567890.123456789e-7}`,
}

// Issue 14 / L3: a write's idempotency hash canonicalises its value; the
// one-pass path must give Encode(Decode(raw))'s bytes and errors exactly.
func TestCanonicalMatchesDecodeEncode(t *testing.T) {
	t.Parallel()
	for _, raw := range canonicalSeeds {
		want, wantErr := slowCanonical([]byte(raw))
		got, err := jsonvalue.Canonical([]byte(raw))
		if wantErr != nil {
			require.Error(t, err, raw)
			require.Equal(t, wantErr.Error(), err.Error(), raw)
			continue
		}
		require.NoError(t, err, raw)
		require.Equal(t, string(want), string(got), raw)
	}
}

func FuzzCanonicalMatchesDecodeEncode(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := slowCanonical(raw)
		got, err := jsonvalue.Canonical(raw)
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("%q: Decode+Encode error %v, Canonical error %v", raw, wantErr, err)
		}
		if err == nil && string(want) != string(got) {
			t.Fatalf("%q: Decode+Encode %q, Canonical %q", raw, want, got)
		}
	})
}

func BenchmarkCanonical(b *testing.B) {
	raw := []byte(`{"account_id": "acct-42", "amount": 1250, "tags": ["a", "b"], "meta": {"source": "bench", "at": "2026-12-06T03:00:00Z"}}`)
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			if _, err := jsonvalue.Canonical(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := slowCanonical(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
