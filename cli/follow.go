package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/actionsledger/actionsledger/client"
)

// Reconnecting: a stream that was open and broke (a *client.TransportError)
// is opened again after 1s, 2s, 4s, ... up to maxBackoff, at most
// maxReconnects times in a row; an update in between resets the count.
const maxReconnects = 5

var (
	firstBackoff = time.Second
	maxBackoff   = 8 * time.Second
)

// updates is what followLoop reads: a client stream, or one with its
// first update read ahead (peeked).
type updates[T any] interface {
	Next(ctx context.Context) (T, error)
	Close() error
}

// peeked is a stream whose first update was read already.
type peeked[T any] struct {
	updates[T]
	first T
	taken bool
}

func (p *peeked[T]) Next(ctx context.Context) (T, error) {
	if !p.taken {
		p.taken = true
		return p.first, nil
	}
	return p.updates.Next(ctx)
}

// followLoop opens a stream with open and hands each update to on until on
// says stop, the server completes the stream (io.EOF), it refuses or ends
// it with errors, or ctx ends (the user stopped it: nil). open is called
// again after a break, so it must resume where the last update left off.
// Notices about breaks go to notice.
func followLoop[T any](ctx context.Context, notice io.Writer,
	open func(context.Context) (updates[T], error),
	on func(T) (stop bool, err error),
) error {
	s, err := open(ctx)
	if err != nil {
		return stopped(ctx, err)
	}
	fails := 0
	for {
		u, err := s.Next(ctx)
		if err == nil {
			fails = 0
			stop, err := on(u)
			if stop || err != nil {
				_ = s.Close()
				return err
			}
			continue
		}
		_ = s.Close()
		var te *client.TransportError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, io.EOF):
			return nil
		case !errors.As(err, &te):
			return err
		}
		for {
			fails++
			if fails > maxReconnects {
				return err
			}
			wait := min(firstBackoff<<(fails-1), maxBackoff)
			fmt.Fprintf(notice, "actionsledger: stream broke (%v); reconnecting in %s\n", err, wait)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			if s, err = open(ctx); err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			if !errors.As(err, &te) {
				return err
			}
		}
	}
}

// stopped is nil when ctx ended (the user stopped the stream), else err.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
