package jsonvalue_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// HARD-PARTS 7: nesting counts arrays and objects, whether empty or not.
func TestCheckDepth(t *testing.T) {
	t.Parallel()
	nest := func(n int, inner string) []byte {
		return []byte(strings.Repeat("[", n) + inner + strings.Repeat("]", n))
	}
	for _, inner := range []string{"", "1"} {
		require.NoError(t, jsonvalue.Check(nest(jsonvalue.MaxDepth, inner), "v"), "inner %q", inner)
		err := jsonvalue.Check(nest(jsonvalue.MaxDepth+1, inner), "v")
		require.Equal(t, fault.InvalidJSON, fault.CodeOf(err), "inner %q", inner)
	}
}

// HARD-PARTS 6: numbers keep their exact text through Decode and Encode.
func TestExactNumbers(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"9007199254740993123", "-12345678901234567890.000000000000000001", "1e-7"} {
		v, err := jsonvalue.Decode([]byte(`{"n":` + n + `}`))
		require.NoError(t, err)
		out, err := jsonvalue.Encode(v)
		require.NoError(t, err)
		require.Equal(t, `{"n":`+n+`}`, string(out))
	}
	require.True(t, jsonvalue.Equal([]byte(`{"a":1,"b":[2]}`), []byte(`{ "b": [2], "a": 1 }`)))
	require.False(t, jsonvalue.Equal([]byte(`{"a":1}`), []byte(`{"a":2}`)))
}

// Issue 10, found by FuzzJSONValue: PostgreSQL refuses a number whose
// exponent is INT_MAX/2 or beyond, even zero ("value overflows numeric
// format"), so Check refuses it before anything is written.
func TestCheckHugeExponent_Issue10(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"0E2000000000", "0e1073741823", "-0e-1073741823", "0.0e1073741823"} {
		require.Equal(t, fault.InvalidJSON, fault.CodeOf(jsonvalue.Check([]byte(n), "v")), n)
	}
	for _, n := range []string{"0e1073741822", "-0e+1073741822", "0e-16383", "1e131071"} {
		require.NoError(t, jsonvalue.Check([]byte(n), "v"), n)
	}
}

// Issue 10, found by FuzzJSONValue: decoding keeps only the last of a
// repeated key, but PostgreSQL reads every one, so Check looks at them all.
func TestCheckRepeatedKeys_Issue10(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"0": 1e200000, "0": 0}`,
		`{"a": "x\u0000", "a": "y"}`,
		`{"a": {"k\u0000": 1}, "a": 1}`,
		`[{"a": [1e200000], "a": 0}]`,
	} {
		require.Equal(t, fault.InvalidJSON, fault.CodeOf(jsonvalue.Check([]byte(raw), "v")), raw)
	}
	err := jsonvalue.Check([]byte(`{"a": 1, "b\u0000": 2}`), "v")
	require.ErrorContains(t, err, "object keys may not contain the NUL character")
	err = jsonvalue.Check([]byte(`{"a": [{"x": 1}, "b\u0000"]}`), "v")
	require.ErrorContains(t, err, "strings may not contain the NUL character")
	err = jsonvalue.Check([]byte(`{"a": {"b": 1}, "c\u0000": 2}`), "v")
	require.ErrorContains(t, err, "object keys may not contain the NUL character")
	require.NoError(t, jsonvalue.Check([]byte(`{"a": 1, "a": 2, "b": [{"c": null}]}`), "v"))
}

// A value is measured as stored: PostgreSQL writes numbers out in full, so
// a few bytes of exponents may not stand for more than MaxBytes of digits
// (found by a newcomer's attack: 80 times 1e131000, 859 bytes sent, read
// back as 10 MB).
func TestCheckMeasuresNumbersWrittenOut(t *testing.T) {
	t.Parallel()
	nums := func(n int) []byte {
		return []byte("[" + strings.TrimSuffix(strings.Repeat("1e131000,", n), ",") + "]")
	}
	require.NoError(t, jsonvalue.Check(nums(8), "v"), "8 times 131,001 digits fit in 1 MiB")
	err := jsonvalue.Check(nums(9), "v")
	require.Equal(t, fault.PayloadTooLarge, fault.CodeOf(err))
	require.ErrorContains(t, err, "written out in full")
	require.Equal(t, fault.PayloadTooLarge, fault.CodeOf(jsonvalue.Check(nums(80), "v")))
}
