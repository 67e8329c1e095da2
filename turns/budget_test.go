package turns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// G8: the price table's shape, its lookup order and its refusals.
func TestParsePrices_G8(t *testing.T) {
	p, err := ParsePrices(`{"anthropic/claude-x": {"inputPerMTok": 3, "outputPerMTok": 15}, "anthropic/*": {"inputPerMTok": 1, "outputPerMTok": 0},
		"gpt-9": {"inputPerMTok": 0, "outputPerMTok": 2}}`)
	require.NoError(t, err)
	pr, ok := p.Lookup("anthropic", "claude-x")
	require.True(t, ok)
	require.Equal(t, Price{3, 15}, pr)
	pr, ok = p.Lookup("anthropic", "other")
	require.True(t, ok, "provider/* prices every model of the provider")
	require.Equal(t, Price{InputPerMTok: 1}, pr)
	_, ok = p.Lookup("openai", "gpt-9")
	require.True(t, ok, "a bare model name")
	_, ok = p.Lookup("openai", "gpt-1")
	require.False(t, ok)
	require.InDelta(t, 3.0*1000/1e6+15.0*2000/1e6, Price{3, 15}.Cost(1000, 2000), 1e-12)

	empty, err := ParsePrices("  ")
	require.NoError(t, err)
	require.Empty(t, empty)

	path := filepath.Join(t.TempDir(), "prices.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"m": {"inputPerMTok": 0.5, "outputPerMTok": 1}}`), 0o600))
	fromFile, err := ParsePrices(path)
	require.NoError(t, err)
	require.Equal(t, Price{0.5, 1}, fromFile["m"])

	for text, want := range map[string]string{
		`{"m": {"inputPerMTok": -1, "outputPerMTok": 1}}`:  `MODEL_PRICES["m"].inputPerMTok is -1`,
		`{"m": {"inputPerMTok": 1, "outputPerMTok": 1e9}}`: `MODEL_PRICES["m"].outputPerMTok`,
		`{"m": null}`:                `needs both inputPerMTok and outputPerMTok`,
		`{"m": {}}`:                  `needs both inputPerMTok and outputPerMTok`,
		`{"m": {"inputPerMTok": 1}}`: `needs both inputPerMTok and outputPerMTok`,
		`null`:                       `not a price table`,
		`[]`:                         `not a price table`,
		`[{"m": 1}`:                  `not a price table`,
		`{"m": {"input": 1}}`:        `unknown field "input"`,
		`{"/m": {"inputPerMTok": 1, "outputPerMTok": 1}}`: `key "/m"`,
		`{"m": 1}`: `not a price table`,
		filepath.Join(t.TempDir(), "missing.json"): `read the price table`,
	} {
		_, err := ParsePrices(text)
		require.ErrorContains(t, err, want, text)
	}
}

// G8: a meter allows calls below the cap, holds (BUDGET, not retried) at
// or over it, refuses unpriced models under a cap, and counts every call.
func TestMeterHoldsAtTheCap_G8(t *testing.T) {
	prices := Prices{"p/m": {InputPerMTok: 1_000_000, OutputPerMTok: 0}} // $1 per input token
	capUSD := 5.0
	m := NewMeter(prices, &capUSD, 2)
	require.NoError(t, m.Allow("", ""))
	require.NoError(t, m.Allow("p", "m"))
	m.Charge("p", "m", 2, 7)
	require.NoError(t, m.Allow("p", "m"), "spent 4 of 5")
	m.Charge("p", "m", 3, 0)
	err := m.Allow("p", "m")
	h := AsHold(err)
	require.NotNil(t, h, "spent 7 of 5")
	require.Equal(t, CauseBudget, h.Cause)
	require.False(t, h.Retried())
	require.Equal(t, FailBudget, h.Code())
	require.Contains(t, err.Error(), "budget_exhausted: the session spent $7.00 of its $5.00 cap")
	require.Contains(t, h.Explanation, "$7.00 of its $5.00 cap", "the inbox shows why")
	require.Equal(t, Usage{ModelCalls: 2, InputTokens: 5, OutputTokens: 7, CostUSD: 5}, m.Usage())
	require.Equal(t, CodeBudget, ErrorCode(err))

	// An unpriced model under a cap is held before it is called.
	m = NewMeter(prices, &capUSD, 0)
	h = AsHold(m.Allow("q", "other"))
	require.NotNil(t, h)
	require.Contains(t, h.Message, "q/other has no price")

	// No cap: everything is allowed and counted; unpriced calls cost nothing.
	m = NewMeter(prices, nil, 100)
	m.Charge("q", "other", 10, 10)
	require.NoError(t, m.Allow("q", "other"))
	require.Equal(t, Usage{ModelCalls: 1, InputTokens: 10, OutputTokens: 10, Unpriced: 1}, m.Usage())

	var none *Meter
	none.Charge("p", "m", 1, 1)
	require.NoError(t, none.Allow("p", "m"))
	require.Equal(t, Usage{}, none.Usage())
	require.Equal(t, "$0.000100", USD(0.0001))
}
