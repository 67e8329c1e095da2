package turns

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/pgplan"
)

// pipeTx is a transaction on one pooled connection that spends no round
// trip of its own on BEGIN or COMMIT: BEGIN is queued before the first
// batch's statements (pgx.Batch.BeginTx) and COMMIT after the last's. Its
// statements join key arrays to tables, so it plans joins as nested loops
// (pgplan.KeyJoins, queued with BEGIN).
// Results are read batch by batch, so what a batch read decides what the
// next one writes. Not safe for concurrent use.
type pipeTx struct {
	conn *pgxpool.Conn
	tx   pgx.Tx // set once begun
	done bool
}

func newPipeTx(ctx context.Context, pool *pgxpool.Pool) (*pipeTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &pipeTx{conn: conn}, nil
}

// send sends b in the transaction, beginning it with b's statements the
// first time, and reads the results (running b's callbacks).
func (p *pipeTx) send(ctx context.Context, b *pgx.Batch) error {
	if p.done {
		return errors.New("turns: transaction already ended")
	}
	if p.tx == nil {
		begin := &pgx.Batch{}
		begin.BeginTx(pgx.TxOptions{})
		begin.Queue(pgplan.KeyJoins)
		begin.QueuedQueries = append(begin.QueuedQueries, b.QueuedQueries...)
		b = begin
	}
	br := p.conn.SendBatch(ctx, b)
	if p.tx == nil {
		p.tx = br.Tx()
	}
	return br.Close()
}

// asyncCommit makes the rest of a transaction commit without waiting for
// its WAL to reach disk (synchronous_commit off for it alone).
const asyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// commit sends b followed by COMMIT and reads the results. A failure
// leaves the transaction for close to roll back.
func (p *pipeTx) commit(ctx context.Context, b *pgx.Batch) error {
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue("COMMIT")
	if err := p.send(ctx, b); err != nil {
		return err
	}
	if st := p.conn.Conn().PgConn().TxStatus(); st != 'I' {
		return fmt.Errorf("turns: transaction not committed (status %c)", st)
	}
	p.done = true
	return nil
}

// commitTx commits through the pgx.Tx (after statements that needed it).
func (p *pipeTx) commitTx(ctx context.Context) error {
	if p.tx == nil {
		p.done = true
		return nil
	}
	err := p.tx.Commit(ctx)
	p.done = err == nil
	return err
}

// close rolls back a transaction that did not commit and gives the
// connection back.
func (p *pipeTx) close(ctx context.Context) {
	if p.conn == nil {
		return
	}
	if !p.done && p.conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = p.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	p.conn.Release()
	p.conn = nil
}
