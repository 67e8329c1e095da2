package turns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/actionsledger/actionsledger/session"
)

// Price is what a model's tokens cost (G8), in US dollars per million
// tokens.
type Price struct {
	InputPerMTok  float64 `json:"inputPerMTok"`
	OutputPerMTok float64 `json:"outputPerMTok"`
}

// Cost is the price of in input and out output tokens, in US dollars.
func (p Price) Cost(in, out int64) float64 {
	return (float64(in)*p.InputPerMTok + float64(out)*p.OutputPerMTok) / 1e6
}

// Prices is the model price table (MODEL_PRICES, G8). Keys are
// "provider/model" (e.g. "anthropic/claude-sonnet-4-5"), "provider/*" (every
// model of a provider) or a bare model name; Lookup tries them in that
// order.
type Prices map[string]Price

// MaxPrice bounds a price per million tokens (US dollars), so a typo cannot
// make one call cost more than any cap.
const MaxPrice = 10_000

// Lookup returns the price of provider's model.
func (p Prices) Lookup(provider, model string) (Price, bool) {
	for _, k := range []string{provider + "/" + model, provider + "/*", model} {
		if pr, ok := p[k]; ok {
			return pr, true
		}
	}
	return Price{}, false
}

// ParsePrices reads a price table: JSON text (starting with "{") or the
// path of a JSON file holding it; "" is an empty table. Shape:
// {"provider/model": {"inputPerMTok": 3, "outputPerMTok": 15}, ...}.
// Errors name the key and field at fault; prices are 0-MaxPrice.
func ParsePrices(text string) (Prices, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Prices{}, nil
	}
	raw := []byte(text)
	// JSON of any kind (and anything opening like an object or a list) is
	// the table itself, so `[]` or `null` is refused as a table rather
	// than looked for as a file; anything else is a file's path.
	if !json.Valid(raw) && !strings.HasPrefix(text, "{") && !strings.HasPrefix(text, "[") {
		b, err := os.ReadFile(text)
		if err != nil {
			return nil, fmt.Errorf("MODEL_PRICES: read the price table: %w", err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	// Each entry gives both prices: a null, empty or half entry would make
	// a model free, and a spend cap could never be reached.
	var raws map[string]*struct {
		InputPerMTok  *float64 `json:"inputPerMTok"`
		OutputPerMTok *float64 `json:"outputPerMTok"`
	}
	if err := dec.Decode(&raws); err != nil || raws == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("MODEL_PRICES: not a price table ({\"provider/model\": {\"inputPerMTok\": 3, \"outputPerMTok\": 15}}): %w", err)
	}
	p := Prices{}
	for k, r := range raws {
		if r == nil || r.InputPerMTok == nil || r.OutputPerMTok == nil {
			return nil, fmt.Errorf("MODEL_PRICES[%q] needs both inputPerMTok and outputPerMTok (0 for a free direction)", k)
		}
		p[k] = Price{InputPerMTok: *r.InputPerMTok, OutputPerMTok: *r.OutputPerMTok}
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pr := p[k]
		switch {
		case strings.TrimSpace(k) == "" || strings.HasPrefix(k, "/") || strings.HasSuffix(k, "/"):
			return nil, fmt.Errorf("MODEL_PRICES: key %q is not provider/model, provider/* or a model name", k)
		case !(pr.InputPerMTok >= 0 && pr.InputPerMTok <= MaxPrice):
			return nil, fmt.Errorf("MODEL_PRICES[%q].inputPerMTok is %v: it is 0-%d US dollars per million tokens", k, pr.InputPerMTok, MaxPrice)
		case !(pr.OutputPerMTok >= 0 && pr.OutputPerMTok <= MaxPrice):
			return nil, fmt.Errorf("MODEL_PRICES[%q].outputPerMTok is %v: it is 0-%d US dollars per million tokens", k, pr.OutputPerMTok, MaxPrice)
		}
	}
	return p, nil
}

// Usage is session.Usage: calls, tokens and their cost (G8).
type Usage = session.Usage

// Meter counts a turn's model use over all its attempts and guards its
// session's spend cap (G8). Handlers that call models report each call
// (Charge) and ask before each (Allow). Safe for concurrent use; a nil
// Meter counts nothing and allows everything.
type Meter struct {
	mu     sync.Mutex
	prices Prices
	// capUSD is the session's cap (nil: none); spent what the session had
	// spent before the turn.
	capUSD *float64
	spent  float64
	usage  Usage
	// unpriced names a model the cap cannot price.
	unpriced string
}

// NewMeter returns the meter of a turn of a session that has spent spent
// US dollars under the cap capUSD (nil: no cap).
func NewMeter(prices Prices, capUSD *float64, spent float64) *Meter {
	return &Meter{prices: prices, capUSD: capUSD, spent: spent}
}

// Charge records one model call of provider's model that used in input and
// out output tokens. A model the table does not price costs nothing here
// and, under a cap, stops the turn at its next Allow.
func (m *Meter) Charge(provider, model string, in, out int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage.ModelCalls++
	m.usage.InputTokens += int64(max(in, 0))
	m.usage.OutputTokens += int64(max(out, 0))
	if p, ok := m.prices.Lookup(provider, model); ok {
		m.usage.CostUSD += p.Cost(int64(max(in, 0)), int64(max(out, 0)))
		return
	}
	m.usage.Unpriced++
	if m.capUSD != nil && m.unpriced == "" {
		m.unpriced = provider + "/" + model
	}
}

// Allow returns nil while the session may spend more: no cap, or what it
// spent, this turn included, is below the cap. Otherwise it returns the
// HoldError (cause BUDGET) that holds the turn (G8). A handler calls it
// before each model call, so one call can pass the cap by its own cost at
// most; the executor calls it before the turn runs. It also refuses,
// under a cap, a model the price table cannot price: provider and model
// name the call about to be made, both "" for the turn itself.
func (m *Meter) Allow(provider, model string) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capUSD == nil {
		return nil
	}
	if model != "" {
		if _, ok := m.prices.Lookup(provider, model); !ok && m.unpriced == "" {
			m.unpriced = provider + "/" + model
		}
	}
	var why string
	if m.unpriced != "" {
		why = fmt.Sprintf("the session has a spend cap and the model %s has no price in MODEL_PRICES: add one, then retry the hold", m.unpriced)
	} else if total := m.spent + m.usage.CostUSD; total >= *m.capUSD {
		why = fmt.Sprintf("the session spent %s of its %s cap (maxPerSessionUsd): raise it with setSessionBudget, or skip the hold",
			USD(total), USD(*m.capUSD))
	}
	if why != "" {
		// The hold's explanation says why too, so the inbox and the
		// console show it without the failure message.
		return &HoldError{Cause: CauseBudget, Explanation: why, Message: why}
	}
	return nil
}

// Usage returns what the meter counted.
func (m *Meter) Usage() Usage {
	if m == nil {
		return Usage{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage
}

// USD formats an amount of US dollars for a message: cents, or six
// decimals below a cent.
func USD(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return fmt.Sprintf("$%.6f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// CauseBudget: the session's spend cap stopped the turn (G8), as package
// session declares it.
const CauseBudget = session.CauseBudget
