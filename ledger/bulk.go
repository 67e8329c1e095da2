package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
)

// MaxBulk is the most items one AppendEvents or PutValues call takes.
const MaxBulk = 1000

// maxBulkErrors is the most invalid items one bulk call reports.
const maxBulkErrors = 20

// EventInput is one event of AppendEvents: as the arguments of AppendEvent.
type EventInput struct {
	// The json names are the schema's: errors name an item's fields by them.
	Type           string          `json:"type"`
	Data           jsonvalue.Value `json:"data"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

// ValueInput is one record write of PutValues: as the arguments of PutValue.
type ValueInput struct {
	Namespace      string          `json:"namespace"`
	Key            string          `json:"key"`
	Value          jsonvalue.Value `json:"value"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

// AppendEvents appends 1 to MaxBulk events with no record in one
// transaction, all or nothing, in the order given: their positions are
// consecutive (those of replayed items aside) and they share one commit
// time (L1, L3). It returns each item's event.
//
// Each item is validated as AppendEvent's arguments; every invalid item
// is reported (up to 20, joined with errors.Join), each *fault.Error
// naming its field as events[i].type, events[i].data or
// events[i].idempotencyKey, and nothing is written. An item whose
// idempotency key was used before for the same event returns that first
// event and is not written again; for a different request the call fails
// with fault.IdempotencyConflict naming the item, and nothing is written.
// An item that repeats the key of an earlier item of the same call is that
// earlier item sent again: it returns the same event when it carries the
// same type and data, else it is a conflict. Keys are shared with
// AppendEvent: a key first used by either is honoured by both.
//
// Errors: fault.BadInput (an item, or no items: field events),
// fault.PayloadTooLarge (more than MaxBulk items, or an item's data),
// fault.ReservedEventType, fault.InvalidJSON, fault.IdempotencyConflict.
func (s *Store) AppendEvents(ctx context.Context, items []EventInput) ([]Event, error) {
	if err := checkCount(len(items), "events"); err != nil {
		return nil, err
	}
	ws := make([]write, len(items))
	var errs []error
	for i, it := range items {
		w, err := eventWrite(it.Type, it.Data, it.IdempotencyKey, fmt.Sprintf("events[%d].", i))
		if err != nil && len(errs) < maxBulkErrors {
			errs = append(errs, err)
		}
		ws[i] = w
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out, err := s.bulk(ctx, ws, "events")
	if err != nil {
		return nil, err
	}
	evs := make([]Event, len(out))
	for i, o := range out {
		evs[i] = o.ev
	}
	return evs, nil
}

// PutValues writes 1 to MaxBulk key-value records in one transaction, all
// or nothing, each with its event as PutValue does (L2, L3), in the order
// given. A key written by more than one item takes consecutive versions,
// the last item's value staying. It returns each item's record as its
// write left it. Validation, idempotency keys and errors are as for
// AppendEvents, with fields records[i].namespace, records[i].key,
// records[i].value and records[i].idempotencyKey; keys are shared with
// PutValue.
func (s *Store) PutValues(ctx context.Context, items []ValueInput) ([]KVValue, error) {
	if err := checkCount(len(items), "records"); err != nil {
		return nil, err
	}
	ws := make([]write, len(items))
	var errs []error
	for i, it := range items {
		w, err := valueWrite(it.Namespace, it.Key, it.Value, it.IdempotencyKey, fmt.Sprintf("records[%d].", i))
		if err != nil && len(errs) < maxBulkErrors {
			errs = append(errs, err)
		}
		ws[i] = w
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out, err := s.bulk(ctx, ws, "records")
	if err != nil {
		return nil, err
	}
	kvs := make([]KVValue, len(out))
	for i, o := range out {
		kvs[i] = o.kv()
	}
	return kvs, nil
}

func checkCount(n int, field string) error {
	switch {
	case n == 0:
		return fault.New(fault.BadInput, field, "give 1 to %d items", MaxBulk)
	case n > MaxBulk:
		return fault.New(fault.PayloadTooLarge, field, "%d items; one call takes at most %d", n, MaxBulk)
	}
	return nil
}

// bulk commits ws all or nothing and returns each one's outcome. Items
// that repeat an earlier item's idempotency key are not sent: they take
// that item's outcome (or fail the call when they differ from it).
func (s *Store) bulk(ctx context.Context, ws []write, arg string) ([]outcome, error) {
	first := map[string]int{} // idempotency key -> index of its first item
	alias := make([]int, len(ws))
	send := make([]write, 0, len(ws))
	sent := make([]int, len(ws)) // index in send
	for i, w := range ws {
		alias[i] = -1
		if w.idem != "" {
			if j, ok := first[w.idem]; ok {
				if ws[j].op != w.op || ws[j].hash != w.hash {
					return nil, fault.New(fault.IdempotencyConflict, fmt.Sprintf("%s[%d].idempotencyKey", arg, i),
						"this idempotency key is used by %s[%d] of the same call for a different request", arg, j)
				}
				alias[i] = j
				continue
			}
			first[w.idem] = i
		}
		sent[i] = len(send)
		send = append(send, w)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	out, err := runAtomic(ctx, conn.Conn(), s.notifier, send, s.clock.Now(), func(ws []write, out []outcome) error {
		for i, o := range out {
			if fe := fault.As(o.err); fe != nil && fe.Code == fault.IdempotencyConflict {
				return fault.New(fault.IdempotencyConflict, fmt.Sprintf("%s[%d].idempotencyKey", arg, first[ws[i].idem]),
					"this idempotency key was used for a different request")
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := make([]outcome, len(ws))
	for i := range ws {
		o := out[sent[i]]
		if alias[i] >= 0 {
			o = out[sent[alias[i]]]
		}
		if o.err != nil {
			return nil, o.err
		}
		res[i] = o
	}
	return res, nil
}
