package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bounds what one client can make the HTTP front hold or do (issue
// 10 items 6 and 8). A zero or negative field takes its value from
// DefaultLimits; see docs/limits.md.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's line and headers; a
	// client slower than that has its connection closed.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, from
	// its first byte. A body not received in time is answered HTTP 408 with
	// code TIMEOUT and the connection is closed.
	ReadTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request before it is closed.
	IdleTimeout time.Duration
	// RequestTimeout bounds handling one GraphQL request once its body is
	// read; past it the client gets HTTP 503 with code TIMEOUT and the
	// request's context is cancelled, which stops its database calls.
	RequestTimeout time.Duration
	// MaxConns caps the connections served at once; more wait, unanswered,
	// until one closes (golang.org/x/net/netutil.LimitListener).
	MaxConns int
	// MaxMutationFields caps the mutation fields (writes) one request may
	// select (MUTATION_LIMIT_EXCEEDED).
	MaxMutationFields int
	// MaxStreams caps the subscription streams (WebSockets and SSE
	// requests) served at once; each holds a connection, so it stays below
	// MaxConns and ordinary requests keep connections to run on. More are
	// refused with HTTP 503 and UNAVAILABLE (issue 12). Zero: half of
	// MaxConns (256 with the default 512). LIVE_MAX_STREAMS.
	MaxStreams int
	// MaxSocketSubscriptions caps the subscriptions one WebSocket carries
	// at once; more are refused with SUBSCRIPTION_LIMIT_EXCEEDED (default
	// MaxConnSubscriptions, 100). LIVE_MAX_SOCKET_SUBSCRIPTIONS.
	MaxSocketSubscriptions int
}

// DefaultLimits are the limits a zero Limits field takes.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	IdleTimeout:       60 * time.Second,
	RequestTimeout:    60 * time.Second,
	MaxConns:          512,
	MaxMutationFields: 50,
	// MaxStreams is zero: half of MaxConns.
	MaxSocketSubscriptions: MaxConnSubscriptions,
}

// writeGrace is how long past reading and handling a request its response
// may take to write before the connection is closed (a client that does not
// read).
const writeGrace = 10 * time.Second

// withDefaults returns l with every unset field taken from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	pick(&l.ReadTimeout, d.ReadTimeout)
	pick(&l.IdleTimeout, d.IdleTimeout)
	pick(&l.RequestTimeout, d.RequestTimeout)
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.MaxMutationFields <= 0 {
		l.MaxMutationFields = d.MaxMutationFields
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = max(1, l.MaxConns/2)
	}
	if l.MaxSocketSubscriptions <= 0 {
		l.MaxSocketSubscriptions = d.MaxSocketSubscriptions
	}
	return l
}

// shutdownKey holds, in every request's context, a context that ends when
// the server begins to shut down: streams end with it (Shutdown waits for
// ordinary requests but neither ends nor tracks long-lived ones).
type shutdownKey struct{}

// Serve serves h on ln with the limits of lim until ctx ends, then shuts
// down, giving requests in flight up to 10 s. It is the one place the
// service's *http.Server is built, for App.Run and the tests alike. It
// returns nil after ctx ends, or the error that stopped serving.
// (RequestTimeout and MaxMutationFields apply in GraphQL, through Front.)
func Serve(ctx context.Context, ln net.Listener, h http.Handler, lim Limits) error {
	lim = lim.withDefaults()
	closing, closeStreams := context.WithCancel(context.Background())
	defer closeStreams()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		IdleTimeout:       lim.IdleTimeout,
		WriteTimeout:      lim.ReadTimeout + lim.RequestTimeout + writeGrace,
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), shutdownKey{}, closing)
		},
	}
	srv.RegisterOnShutdown(closeStreams)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(netutil.LimitListener(ln, lim.MaxConns))
	close(done)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
