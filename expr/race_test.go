//go:build race

package expr_test

// raceEnabled: the race detector changes what the runtime allocates (cel-go's
// cost tracking counts runes through a []rune conversion the compiler
// otherwise elides), so allocation bounds that depend on it are checked
// without -race only.
const raceEnabled = true
