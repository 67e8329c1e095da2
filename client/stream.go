package client

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/Khan/genqlient/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// ErrClosed is returned by Stream.Next after Close.
var ErrClosed = errors.New("client: stream closed")

// Stream is a running subscription (issue 12). Next returns its updates in
// order; Close ends it. A Stream is for one goroutine at a time.
type Stream[T any] struct {
	sub  *sseSubscriber
	recv func(ctx context.Context) (T, error)
	once sync.Once
}

// Next blocks until the next update. It returns io.EOF when the server
// completed the subscription, a *ResponseError when the server sent errors
// (the subscription refused or ended with a reason), a *TransportError
// when the stream broke, ctx's error when ctx ended first, and ErrClosed
// after Close.
func (s *Stream[T]) Next(ctx context.Context) (T, error) { return s.recv(ctx) }

// Close ends the stream and releases its connection; harmless to repeat.
func (s *Stream[T]) Close() error {
	var err error
	s.once.Do(func() { err = s.sub.Close() })
	return err
}

// follow opens a subscription with start (a generated subscription
// function) and returns its updates as a Stream; unwrap takes the update
// out of the generated response type. ctx bounds the whole stream.
func follow[W any, T any](ctx context.Context, c *Client,
	start func(graphql.WebSocketClient) (chan W, string, error),
	unwrap func(W) (*T, gqlerror.List),
) (*Stream[*T], error) {
	sub := newSSESubscriber(c)
	errs, _ := sub.Start(ctx)
	ch, _, err := start(sub)
	if err != nil {
		_ = sub.Close()
		return nil, err
	}
	s := &Stream[*T]{sub: sub}
	s.recv = func(ctx context.Context) (*T, error) {
		select {
		case w, ok := <-ch:
			if !ok {
				select {
				case err, ok := <-errs:
					if ok && err != nil {
						return nil, err
					}
				default:
				}
				if sub.isClosed() {
					return nil, ErrClosed
				}
				return nil, io.EOF
			}
			v, gerrs := unwrap(w)
			if len(gerrs) > 0 {
				return nil, fromGQL(gerrs)
			}
			if v == nil {
				return nil, errors.New("client: an update without data")
			}
			return v, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s, nil
}

func (s *sseSubscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// FollowLedgerEvents subscribes to ledgerEvents: committed events in commit
// order, first those after the position after (nil: only events committed
// from now on), then each as it commits; eventType (nil: all) keeps one
// type. Needs READ on the ledger.
func (c *Client) FollowLedgerEvents(ctx context.Context, after, eventType *string) (*Stream[*LedgerEvent], error) {
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan LedgerEventsWsResponse, string, error) {
		return LedgerEvents(ctx, ws, after, eventType)
	}, func(w LedgerEventsWsResponse) (*LedgerEvent, gqlerror.List) {
		if w.Data == nil {
			return nil, w.Errors
		}
		return &w.Data.LedgerEvents, w.Errors
	})
}

// FollowSessionUpdates subscribes to sessionUpdates of session id of
// action actionID: the session as it is, then after every change, and each
// transcript entry of a running turn. Needs READ on the action.
func (c *Client) FollowSessionUpdates(ctx context.Context, actionID, id string) (*Stream[*SessionUpdate], error) {
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan SessionUpdatesWsResponse, string, error) {
		return SessionUpdates(ctx, ws, actionID, id)
	}, func(w SessionUpdatesWsResponse) (*SessionUpdate, gqlerror.List) {
		if w.Data == nil {
			return nil, w.Errors
		}
		return &w.Data.SessionUpdates, w.Errors
	})
}
