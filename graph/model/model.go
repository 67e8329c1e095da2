// Package model holds the GraphQL scalars and namespace types; generated
// models live in models_gen.go.
package model

import (
	"io"
	"math"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/segmentio/encoding/json"

	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/text"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/session"
)

// Namespace objects: their fields are resolved by the resolvers.
type (
	Query           struct{}
	Mutation        struct{}
	LedgerQuery     struct{}
	LedgerMutation  struct{}
	ActionsQuery    struct{}
	ActionsMutation struct{}
	AuthQuery       struct{}
	AuthMutation    struct{}
)

// MarshalUUID writes a UUID in canonical form.
func MarshalUUID(u uuid.UUID) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(u.String())) })
}

// UnmarshalUUID reads a UUID from a string. Errors: fault.BadInput.
func UnmarshalUUID(v any) (uuid.UUID, error) {
	s, ok := v.(string)
	if !ok {
		return uuid.Nil, fault.New(fault.BadInput, "", "a UUID is a string")
	}
	u, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, fault.New(fault.BadInput, "", "%q is not a UUID in canonical form", text.Cut(s, 64))
	}
	return u, nil
}

// MarshalJSON writes a JSON value as is (null when empty).
func MarshalJSON(v jsonvalue.Value) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if len(v) == 0 {
			_, _ = io.WriteString(w, "null")
			return
		}
		_, _ = w.Write(v)
	})
}

// UnmarshalJSON accepts any GraphQL value (an object literal or a variable)
// and encodes it as JSON; numbers from variables arrive as json.Number and
// keep their exact text.
//
// The encoder is github.com/segmentio/encoding/json, which writes what
// encoding/json writes (sorted keys, the same escapes; held to it by
// FuzzUnmarshalJSONMatchesEncodingJSON) in half the time and with one
// allocation: a bulk write encodes every record's value here (issue 14).
func UnmarshalJSON(v any) (jsonvalue.Value, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fault.New(fault.InvalidJSON, "", "not representable as JSON: %v", err)
	}
	return jsonvalue.Value(raw), nil
}

// TimeLayout is how times are written: RFC 3339, UTC, microseconds.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// MarshalTime writes a time in TimeLayout.
func MarshalTime(t time.Time) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(t.UTC().Format(TimeLayout))) })
}

// UnmarshalTime reads an RFC 3339 time. Errors: fault.BadInput.
func UnmarshalTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, fault.New(fault.BadInput, "", "a time is an RFC 3339 string")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fault.New(fault.BadInput, "", "%q is not an RFC 3339 time", text.Cut(s, 64))
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// Invocation is what an execution's handler was given and replied; its
// transcript is resolved page by page.
type Invocation struct {
	ExecutionID uuid.UUID
	Output      jsonvalue.Value
	// Approvals are the interrupts the execution left the session waiting
	// on (P1, P2); HoldID the hold of a held execution (H2).
	Approvals []uuid.UUID
	HoldID    *uuid.UUID
}

// MarshalInt writes a GraphQL Int.
func MarshalInt(i int) graphql.Marshaler { return graphql.MarshalInt(i) }

// UnmarshalInt reads a GraphQL Int: a whole number that fits in 32 bits,
// as the GraphQL specification defines Int (a larger one would overflow
// the database's int columns). Errors: fault.BadInput.
func UnmarshalInt(v any) (int, error) {
	n, err := graphql.UnmarshalInt64(v)
	if err != nil {
		return 0, fault.New(fault.BadInput, "", "an Int is a whole number: %v", err)
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fault.New(fault.BadInput, "", "an Int is at most %d and at least %d (got %d)", math.MaxInt32, math.MinInt32, n)
	}
	return int(n), nil
}

// SessionStart is what startSession did (G7): the session, and whether
// this call created it.
type SessionStart struct {
	Session *session.Session `json:"session"`
	Created bool             `json:"created"`
}
