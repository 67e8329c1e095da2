package session

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TurnRef names one turn of a session.
type TurnRef struct {
	SID  int64
	Turn int
}

// QueueTurnInputs queues on b the read of the inputs that each of the
// turns refs took; when b's results are read, into holds each turn's
// inputs in the order the turn had them (as TurnInputs), and turns that
// took none are absent. It is a dataloader's batch read (issue 14): one
// statement for any number of turns.
func QueueTurnInputs(b *pgx.Batch, refs []TurnRef, into map[TurnRef][]Input) {
	sids := make([]int64, len(refs))
	nums := make([]int32, len(refs))
	for i, r := range refs {
		sids[i], nums[i] = r.SID, int32(r.Turn)
	}
	// The turn comes last, after the columns ScanInput reads; a turn's
	// inputs are ordered as in TurnInputs.
	b.Queue(`SELECT `+InputColumns+`, took FROM (
		SELECT i.*, t.turn AS took FROM unnest($1::bigint[], $2::int[]) AS k (sid, turn)
		JOIN turn_inputs t ON t.sid = k.sid AND t.turn = k.turn
		JOIN session_inputs i ON i.sid = t.sid AND i.seq = t.seq) x
		ORDER BY sid, took, order_key, seq`, sids, nums).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var took int
			in, err := ScanInput(withExtra{rows, []any{&took}})
			if err != nil {
				return fmt.Errorf("session: turn inputs: %w", err)
			}
			r := TurnRef{in.SID, took}
			into[r] = append(into[r], in)
		}
		return rows.Err()
	})
}

// withExtra is a row whose Scan fills extra after the destinations it is
// given: a scan function of the table's columns reads a row that carries
// more.
type withExtra struct {
	pgx.Rows
	extra []any
}

func (r withExtra) Scan(dest ...any) error { return r.Rows.Scan(append(dest, r.extra...)...) }
