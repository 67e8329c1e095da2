package server

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// TestCheckArgNamesTheOffendingValue: the path of a refused string is
// spelled as the client wrote it, through fields, list indexes and map
// keys (HARD-PARTS 7), though it is only formatted for an error.
func TestCheckArgNamesTheOffendingValue(t *testing.T) {
	type inner struct {
		Event string `json:"event"`
	}
	type input struct {
		Name     string            `json:"name"`
		Triggers []inner           `json:"triggers"`
		Labels   map[string]string `json:"labels"`
		Plain    string
	}
	cases := []struct {
		name string
		arg  any
		path string
	}{
		{"top-level string", "a\x00b", "input"},
		{"field", input{Name: "a\x00"}, "input.name"},
		{"list element's field", &input{Triggers: []inner{{"ok"}, {"x\x00"}}}, "input.triggers[1].event"},
		{"map value", input{Labels: map[string]string{"b": "ok", "a": "\xff"}}, "input.labels.a"},
		{"untagged field", input{Plain: "\x00"}, "input.Plain"},
		{"list of strings", []string{"a", "b", "\x00"}, "input[2]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := argPath{{name: "input"}}
			err := checkArg(reflect.ValueOf(tc.arg), &path, true)
			var f *fault.Error
			require.ErrorAs(t, err, &f)
			require.Equal(t, tc.path, f.Field)
		})
	}
	path := argPath{{name: "input"}}
	require.NoError(t, checkArg(reflect.ValueOf(input{Name: "fine", Triggers: []inner{{"ok"}}}), &path, true))
}

// BenchmarkCheckArgBulk: the walk over a bulk write's 500 records, which
// builds no path unless a value is refused (issue 14).
func BenchmarkCheckArgBulk(b *testing.B) {
	type record struct {
		Namespace string  `json:"namespace"`
		Key       string  `json:"key"`
		Idem      *string `json:"idempotencyKey"`
	}
	recs := make([]record, 500)
	for i := range recs {
		k := "entry-key"
		recs[i] = record{Namespace: "entry", Key: "k", Idem: &k}
	}
	v := reflect.ValueOf(recs)
	b.ReportAllocs()
	for b.Loop() {
		path := argPath{{name: "records"}}
		if err := checkArg(v, &path, true); err != nil {
			b.Fatal(err)
		}
	}
}
