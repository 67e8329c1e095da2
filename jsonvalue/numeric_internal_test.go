package jsonvalue

import "testing"

// numeric gives the length PostgreSQL's numeric output gives each number
// (psql: SELECT '<n>'::jsonb::text).
func TestNumericLen(t *testing.T) {
	t.Parallel()
	for n, want := range map[string]int64{
		"0": 1, "7": 1, "-7": 2, "1e3": 4, "1E+3": 4, "-1.5e-3": 7, "0e-3": 5, "0e5": 1, "12e-1": 3,
		"123.4500": 8, "1.5e300": 301, "0.001": 5, "1e131000": 131001, "0.0120": 6,
	} {
		if got, _ := numeric(n); got != want {
			t.Errorf("numeric(%s) = %d, want %d", n, got, want)
		}
	}
}
