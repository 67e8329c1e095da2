package expr

import (
	"fmt"
	"strings"

	"cel.dev/cel-go/parser"
)

// EventGuard returns, for a resume predicate that reads session, a start
// predicate made of its top-level conjuncts that read event and not session
// (at least one exists: Compile enforces it). The dispatcher evaluates the
// guard before looking a session up, so an event the predicate's event terms
// already reject never reaches the session lookup (and never becomes an
// intake record). It returns nil for a predicate that reads no session.
func (p *Program) EventGuard() (*Program, error) {
	if p.role != ResumePredicate || !p.reads[varSession] {
		return nil, nil
	}
	native := p.ast.NativeRep()
	var parts []string
	for _, c := range conjuncts(native.Expr(), nil) {
		r := reads(c)
		if !r[varEvent] || r[varSession] {
			continue
		}
		src, err := parser.Unparse(c, native.SourceInfo())
		if err != nil {
			return nil, fmt.Errorf("expr: event guard: %w", err)
		}
		parts = append(parts, "("+src+")")
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return Compile(StartPredicate, strings.Join(parts, " && "))
}
