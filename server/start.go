package server

import (
	"context"
	"log/slog"
	"sync"
)

// Start builds the service (New) and runs it (Run) in the background, for
// programs that drive it in this process: the demo and the benchmarks.
// stop cancels Run, waits for it, closes the App and returns Run's error;
// calling it again returns the same. With cfg.Addr empty nothing is served
// over HTTP: serve app.Handler() yourself (Serve) or call it in process.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (app *App, stop func() error, err error) {
	app, err = New(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	var once sync.Once
	var runErr error
	return app, func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			app.Close()
		})
		return runErr
	}, nil
}
