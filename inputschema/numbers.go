package inputschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// maxExponent bounds the decimal exponent written in a number of a schema or
// an input. The library turns numbers into big.Rat: beyond roughly 1e±1000000
// that fails and the library panics (or, in a schema, silently drops the
// keyword), and long before that the arithmetic gets slow. Postgres numeric,
// where inputs end up, cannot hold such values either.
const maxExponent = 10000

// hugeNumber finds a json.Number in v whose exponent is out of range and
// returns its location and text.
func hugeNumber(v any, loc []string) ([]string, string, bool) {
	switch v := v.(type) {
	case json.Number:
		if !inRange(string(v)) {
			return loc, string(v), true
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if l, n, ok := hugeNumber(v[k], append(loc, k)); ok {
				return l, n, true
			}
		}
	case []any:
		for i, e := range v {
			if l, n, ok := hugeNumber(e, append(loc, strconv.Itoa(i))); ok {
				return l, n, true
			}
		}
	}
	return nil, "", false
}

func inRange(num string) bool {
	i := strings.IndexAny(num, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(num[i+1:])
	return err == nil && exp >= -maxExponent && exp <= maxExponent
}

// exact writes a number without the rounding of float64, so that a message
// about a 19-digit maximum shows the digits that were compared.
func exact(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.Num().BitLen() > 256 || r.Denom().BitLen() > 256 {
		f, _ := r.Float64()
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if r.IsInt() {
		return r.Num().String()
	}
	// A JSON number's denominator is 2^a·5^b, so max(a, b) decimals are exact.
	d := new(big.Int).Set(r.Denom())
	two, five := 0, 0
	m := new(big.Int)
	for d.Bit(0) == 0 {
		d.Rsh(d, 1)
		two++
	}
	for {
		q, rem := new(big.Int).QuoRem(d, big.NewInt(5), m)
		if rem.Sign() != 0 {
			break
		}
		d = q
		five++
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		return r.RatString()
	}
	return r.FloatString(max(two, five))
}

// numericMessage words the numeric keyword failures with exact numbers; the
// library prints them as float64.
func numericMessage(k any) (string, bool) {
	switch k := k.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("%s is less than the minimum %s", exact(k.Got), exact(k.Want)), true
	case *kind.Maximum:
		return fmt.Sprintf("%s is greater than the maximum %s", exact(k.Got), exact(k.Want)), true
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s is not greater than the exclusiveMinimum %s", exact(k.Got), exact(k.Want)), true
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s is not less than the exclusiveMaximum %s", exact(k.Got), exact(k.Want)), true
	case *kind.MultipleOf:
		return fmt.Sprintf("%s is not a multiple of %s", exact(k.Got), exact(k.Want)), true
	}
	return "", false
}
