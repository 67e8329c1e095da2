package jsonvalue

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// scanTokens is scan as it was written before issue 14, over
// encoding/json's tokens: the reference FuzzScanMatchesTokens holds the
// one-pass scan to.
func scanTokens(raw []byte, field string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var open []byte    // the containers around the next token
	var wantKey []bool // per open container: an object's next string is a key
	// grow is how many bytes the numbers add once written out in full, as
	// PostgreSQL stores and returns them (1e131000 is 131,001 digits).
	var grow int64
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if stored := int64(len(raw)) + grow; stored > MaxBytes {
				return fault.New(fault.PayloadTooLarge, field, "JSON value is %d bytes with its numbers written out in full, as stored (an exponent such as 1e1000 stands for its digits); the limit is %d", stored, MaxBytes)
			}
			return nil
		}
		if err != nil {
			return fault.New(fault.InvalidJSON, field, "not a well-formed JSON value: %v", err)
		}
		key := len(open) > 0 && open[len(open)-1] == '{' && wantKey[len(wantKey)-1]
		if len(open) > 0 && open[len(open)-1] == '{' {
			wantKey[len(wantKey)-1] = !key
		}
		switch x := tok.(type) {
		case json.Delim:
			switch x {
			case '{', '[':
				if len(open)+1 > MaxDepth {
					return fault.New(fault.InvalidJSON, field, "JSON value nests deeper than %d levels", MaxDepth)
				}
				open, wantKey = append(open, byte(x)), append(wantKey, x == '{')
			default:
				open, wantKey = open[:len(open)-1], wantKey[:len(wantKey)-1]
				if len(open) > 0 && open[len(open)-1] == '{' {
					wantKey[len(wantKey)-1] = true // the closing ends a value
				}
			}
		case json.Number:
			size, fits := numeric(string(x))
			if !fits {
				return fault.New(fault.InvalidJSON, field, "number %.40s is outside the stored range (at most %d digits before the decimal point and %d after)", x, maxIntDigits, maxFracDigits)
			}
			if n := size - int64(len(x)); n > 0 {
				grow += n
			}
		case string:
			if strings.IndexByte(x, 0) < 0 {
				break
			}
			if key {
				return fault.New(fault.InvalidJSON, field, "object keys may not contain the NUL character (\\u0000)")
			}
			return fault.New(fault.InvalidJSON, field, "strings may not contain the NUL character (\\u0000)")
		}
	}
}

// FuzzScanMatchesTokens: on every input Check's first checks accept, scan
// and scanTokens accept alike, and refuse with the same code and message
// (issue 10: depth, NUL, number range and stored size).
func FuzzScanMatchesTokens(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":"c"}]}`, `"x\u0000"`, `{"\u0000":1}`, `{"a":"\u0000"}`, `1e1000`, `-0.5e-3`,
		`[[[[1]]]]`, `{"k" : "v\\u0000"}`, `"\\"`, `{"a\"b":"\u00000"}`, `123456789012345678901234567890`,
		strings.Repeat("[", 70) + strings.Repeat("]", 70), `1e131072`, `[1e131000, 2]`, `true`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > MaxBytes || !json.Valid(raw) || !utf8.Valid(raw) || !surrogatesPaired(raw) {
			return
		}
		got, want := scan(raw, "v"), scanTokens(raw, "v")
		if (got == nil) != (want == nil) {
			t.Fatalf("%q: scan %v, tokens %v", raw, got, want)
		}
		if got != nil && (fault.CodeOf(got) != fault.CodeOf(want) || got.Error() != want.Error()) {
			t.Fatalf("%q: scan %v, tokens %v", raw, got, want)
		}
	})
}

// BenchmarkScan compares scan with scanTokens on a small record value and
// on a 100-item document.
func BenchmarkScan(b *testing.B) {
	small := []byte(`{"account_id":"acct-17","amount":42.5}`)
	var big strings.Builder
	big.WriteString(`{"items":[`)
	for i := range 100 {
		if i > 0 {
			big.WriteByte(',')
		}
		big.WriteString(`{"id":"item-1234","qty":3,"price":19.99,"tags":["a","b"],"ok":true}`)
	}
	big.WriteString(`]}`)
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"small", small}, {"100items", []byte(big.String())}} {
		b.Run(c.name+"/onepass", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := scan(c.raw, "v"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/tokens", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := scanTokens(c.raw, "v"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
