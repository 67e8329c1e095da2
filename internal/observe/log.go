package observe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// Log formats (LOG_FORMAT).
const (
	LogText = "text" // slog's key=value lines (the default)
	LogJSON = "json" // one JSON object a line
)

// NewLogger returns the service's logger writing to w in format (LogText
// or LogJSON; empty is LogText) at level ("debug", "info", "warn",
// "error"; empty is info). Errors: an unknown format or level.
//
// What goes where (issue 12): info has one line per request (server's
// access log), per settled turn and per interrupt raised or answered, with
// ids, statuses and durations but never tokens, credentials or inputs;
// debug adds details such as a turn's inputs count and failure text.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("log level %q: %w", level, err)
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("LOG_FORMAT %q: want %s or %s", format, LogText, LogJSON)
}

// AtLeast returns a logger that writes what l writes, but only at min and
// above: benchmarks run the service with it at warn, so per-turn info lines
// do not cost throughput.
func AtLeast(l *slog.Logger, min slog.Level) *slog.Logger {
	return slog.New(minLevel{Handler: l.Handler(), min: min})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.Handler.Enabled(ctx, level)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
