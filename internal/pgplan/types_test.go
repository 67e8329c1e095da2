package pgplan_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/pgplan"
)

// BenchmarkEncodeUUIDs encodes a batch statement's []uuid.UUID parameter
// (100 ids) as pgx does, with and without Types (issue 14).
func BenchmarkEncodeUUIDs(b *testing.B) {
	ids := make([]uuid.UUID, 100)
	for i := range ids {
		ids[i] = uuid.New()
	}
	for _, tc := range []struct {
		name  string
		types bool
	}{{"driver.Valuer", false}, {"Types", true}} {
		b.Run(tc.name, func(b *testing.B) {
			tm := pgtype.NewMap()
			if tc.types {
				pgplan.Types(tm)
			}
			var buf []byte
			for b.Loop() {
				var err error
				buf, err = tm.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0])
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTypesEncodeAsBefore: the bytes sent and the values scanned back are
// the same with Types as without.
func TestTypesEncodeAsBefore(t *testing.T) {
	ids := []uuid.UUID{uuid.New(), uuid.New()}
	plain, with := pgtype.NewMap(), pgtype.NewMap()
	pgplan.Types(with)
	for _, v := range []any{ids, ids[0], &ids[1]} {
		oid := uint32(pgtype.UUIDOID)
		if _, array := v.([]uuid.UUID); array {
			oid = pgtype.UUIDArrayOID
		}
		a, err := plain.Encode(oid, pgtype.BinaryFormatCode, v, nil)
		require.NoError(t, err)
		b, err := with.Encode(oid, pgtype.BinaryFormatCode, v, nil)
		require.NoError(t, err)
		require.Equal(t, a, b)
	}
	src, err := plain.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, ids[0], nil)
	require.NoError(t, err)
	var got uuid.UUID
	require.NoError(t, with.Scan(pgtype.UUIDOID, pgtype.BinaryFormatCode, src, &got))
	require.Equal(t, ids[0], got)
	var null uuid.NullUUID
	require.NoError(t, with.Scan(pgtype.UUIDOID, pgtype.BinaryFormatCode, nil, &null))
	require.False(t, null.Valid)
}
