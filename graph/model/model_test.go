package model

import (
	"bytes"
	stdjson "encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// stdUnmarshalJSON is what UnmarshalJSON wrote with encoding/json, before
// issue 14 moved it to a faster encoder: stored values and idempotency
// hashes must not change.
func stdUnmarshalJSON(v any) ([]byte, error) { return stdjson.Marshal(v) }

// TestUnmarshalJSONMatchesEncodingJSON covers what a GraphQL value can be
// besides decoded variables (FuzzUnmarshalJSONMatchesEncodingJSON): the
// Go values of literals (int64, float64) and strings that need escapes.
func TestUnmarshalJSONMatchesEncodingJSON(t *testing.T) {
	for _, v := range []any{
		nil, true, false, int64(0), int64(-42), int64(math.MaxInt64), int64(math.MinInt64),
		0.0, math.Copysign(0, -1), 0.1, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, -3.5e300, math.SmallestNonzeroFloat64,
		"", "plain", "<script>&amp;</script>", "quote \" backslash \\ tab \t nl \n", "\u2028\u2029", "\x00\x1f\x7f",
		"bad utf-8 \xff\xfe", "é中文🙂", stdjson.Number("12"), stdjson.Number("-0.5e+10"),
		map[string]any{"b": int64(1), "a": []any{nil, "x", map[string]any{}}, "<": "&", "": 0.25},
		[]any{}, map[string]any{"z": map[string]any{"y": []any{stdjson.Number("1"), true}}},
	} {
		want, wantErr := stdUnmarshalJSON(v)
		got, err := UnmarshalJSON(v)
		if wantErr != nil {
			require.Error(t, err, "%#v", v)
			continue
		}
		require.NoError(t, err, "%#v", v)
		require.Equal(t, string(want), string(got), "%#v", v)
	}
}

// TestUnmarshalJSONRefusesWhatEncodingJSONRefuses: values JSON cannot
// carry are refused, as before.
func TestUnmarshalJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": math.Inf(-1)}, stdjson.Number("not a number")} {
		_, wantErr := stdUnmarshalJSON(v)
		require.Error(t, wantErr, "%#v", v)
		_, err := UnmarshalJSON(v)
		require.Error(t, err, "%#v", v)
	}
}

// FuzzUnmarshalJSONMatchesEncodingJSON decodes a JSON document as
// gqlgen decodes a request's variables (numbers as json.Number) and holds
// UnmarshalJSON's bytes to encoding/json's (issue 14).
func FuzzUnmarshalJSONMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"account_id":"acct-1","amount":42}`, `[1,2.5,-3e7,"<&>",null,true]`,
		`{"b":{"a":[{}]},"a":"\u2028"}`, `"\ud83d\ude00 é"`, `123456789012345678901234567890`, `{"":""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d := stdjson.NewDecoder(bytes.NewReader(doc))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		want, wantErr := stdUnmarshalJSON(v)
		got, err := UnmarshalJSON(v)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("encoding/json refused %q (%v), UnmarshalJSON did not", doc, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("UnmarshalJSON refused %q: %v", doc, err)
		}
		if !bytes.Equal(want, got) {
			t.Fatalf("%q: encoding/json wrote %s, UnmarshalJSON %s", doc, want, got)
		}
	})
}

// BenchmarkUnmarshalJSON encodes a record value as a bulk write's
// variables bring it (issue 14).
func BenchmarkUnmarshalJSON(b *testing.B) {
	v := map[string]any{"account_id": "acct-17", "amount": stdjson.Number("42"), "note": "refund <late>", "tags": []any{"a", true, nil}}
	b.Run("segmentio", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := UnmarshalJSON(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stdUnmarshalJSON(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
