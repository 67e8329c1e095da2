package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// reportAll adds every error of a joined validation error to the response,
// with fields prefixed by the argument name, and returns the first.
func reportAll(ctx context.Context, err error, arg string) error {
	errs := action.Errors(err)
	for i, e := range errs {
		if fe := fault.As(e); fe != nil && fe.Field != "id" && fe.Field != "from" {
			e = fault.WithField(e, arg)
		}
		if i == 0 {
			err = e
			continue
		}
		graphql.AddError(ctx, e)
	}
	return err
}

// reportEach adds every error of a joined error to the response, fields
// as they are (a bulk write's items name their own index), and returns the
// first.
func reportEach(ctx context.Context, err error) error {
	errs := action.Errors(err)
	for _, e := range errs[1:] {
		graphql.AddError(ctx, e)
	}
	return errs[0]
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
