package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// DebugMux returns net/http/pprof's handlers on a mux of their own
// (/debug/pprof/...), never on the service's listener (issue 12).
func DebugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// listenDebug listens on addr for pprof. A non-loopback address is
// refused unless public: profiles and command lines are for the operator
// of this machine.
func listenDebug(addr string, public bool) (net.Listener, error) {
	if !public {
		if err := checkLoopback(addr); err != nil {
			return nil, fmt.Errorf("DEBUG_ADDR %q is not a loopback address: pprof is served beyond this machine only with DEBUG_PUBLIC=true", addr)
		}
	}
	return net.Listen("tcp", addr)
}

// serveDebug serves DebugMux on ln until ctx ends. A CPU profile or
// execution trace takes the seconds it asks for, so writes get two minutes.
func serveDebug(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: DebugMux(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeDebug serves DebugMux on addr (loopback unless public) in the
// background, for a program that drives the service in its own process
// (the bench); stop ends it.
func ServeDebug(addr string, public bool) (stop func(), err error) {
	ln, err := listenDebug(addr, public)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = serveDebug(ctx, ln)
	}()
	return func() { cancel(); <-done }, nil
}
