//go:build !race

package expr_test

// raceEnabled: see race_test.go.
const raceEnabled = false
