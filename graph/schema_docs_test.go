package graph_test

import (
	"regexp"
	"testing"

	"github.com/actionsledger/actionsledger/graph"
)

// Issue 12 follow-up item 6: the schema's descriptions are what GraphiQL
// and the console show a newcomer, so they hold no requirement ids (P1,
// H3-H5) nor issue numbers: those stay in # comments of schema.graphqls.
func TestSchemaDescriptionsHaveNoSpecIDs(t *testing.T) {
	schema := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}}).Schema()
	ids := regexp.MustCompile(`\b[A-Z][0-9]{1,2}\b|\b[Ii]ssue [0-9]+`)
	check := func(where, desc string) {
		if m := ids.FindString(desc); m != "" {
			t.Errorf("%s: the description names %q: move it to a # comment", where, m)
		}
	}
	n := 0
	for name, def := range schema.Types {
		if def.BuiltIn {
			continue
		}
		check(name, def.Description)
		for _, f := range def.Fields {
			n++
			check(name+"."+f.Name, f.Description)
			for _, a := range f.Arguments {
				check(name+"."+f.Name+"("+a.Name+")", a.Description)
			}
		}
		for _, v := range def.EnumValues {
			n++
			check(name+"."+v.Name, v.Description)
		}
	}
	if n < 100 {
		t.Fatalf("only %d fields and values: the schema did not load", n)
	}
}
