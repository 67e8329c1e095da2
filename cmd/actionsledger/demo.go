package main

import (
	"context"
	"errors"
	"log/slog"
)

type demoCmd struct{}

func (demoCmd) Run(ctx context.Context, g *globals, log *slog.Logger) error {
	return errors.New("demo: not written yet")
}

type benchCmd struct{}

func (benchCmd) Run(ctx context.Context, g *globals, log *slog.Logger) error {
	return errors.New("bench: not written yet")
}
