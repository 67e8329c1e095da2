package fault_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Issue 12 follow-up item 4: every code of this package is in the table of
// docs/errors.md, and the retryable ones (Retryable) are both in its list
// of retryable codes and marked so in the table. A code added without its
// documentation fails here.
func TestEveryCodeIsDocumented(t *testing.T) {
	codes := declaredCodes(t)
	if len(codes) < 30 {
		t.Fatalf("found %d codes in fault.go: the parse is wrong", len(codes))
	}
	raw, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	table := doc[strings.Index(doc, "\n## Codes\n"):]
	rows := map[string]string{} // code: the row's last cell (retry helps)
	quoted := regexp.MustCompile("`([A-Z_]+)`")
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[0], -1) {
			rows[m[1]] = cells[len(cells)-1]
		}
	}
	start, end := strings.Index(doc, "Errors that may pass"), strings.Index(doc, "Any other code")
	if start < 0 || end < start {
		t.Fatal("docs/errors.md: no paragraph naming the retryable codes")
	}
	retryList := doc[start:end]
	for _, c := range codes {
		retry, ok := rows[c]
		if !ok {
			t.Errorf("%s is not in the table of docs/errors.md", c)
			continue
		}
		if fault.Retryable(c) {
			if !strings.Contains(retry, "yes") {
				t.Errorf("%s is retryable: its row in docs/errors.md must say yes", c)
			}
			if !strings.Contains(retryList, "`"+c+"`") {
				t.Errorf("%s is retryable: docs/errors.md must name it among the retryable codes", c)
			}
		} else if strings.Contains(retry, "yes") {
			t.Errorf("%s is not retryable, yet docs/errors.md says retrying helps", c)
		}
	}
}

// declaredCodes returns the values of the string constants of fault.go.
func declaredCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "fault.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes = append(codes, s)
				}
			}
		}
	}
	return codes
}
