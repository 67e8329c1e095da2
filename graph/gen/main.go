// Command gen regenerates the GraphQL code (gqlgen) with one change to
// gqlgen's defaults: the fields of the mutation namespaces (ledger { ... },
// actions { ... }, auth { ... }) run one after another in document order, as root
// mutation fields do. gqlgen resolves nested fields concurrently, which
// would let `mutation { ledger { a: putValue(...) b: putValue(...) } }`
// commit in any order.
package main

import (
	"fmt"
	"os"

	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen"
	"github.com/99designs/gqlgen/codegen/config"
)

// serialMutations is a gqlgen plugin that disables concurrent resolution
// on the mutation namespace objects.
type serialMutations struct{}

func (serialMutations) Name() string { return "serial-mutations" }

func (serialMutations) GenerateCode(data *codegen.Data) error {
	found := 0
	for _, o := range data.Objects {
		if o.Name == "LedgerMutation" || o.Name == "ActionsMutation" || o.Name == "AuthMutation" {
			o.DisableConcurrency = true
			found++
		}
	}
	if found != 3 {
		return fmt.Errorf("serial-mutations: found %d of the 3 mutation namespaces", found)
	}
	return nil
}

func main() {
	cfg, err := config.LoadConfigFromDefaultLocations()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen: load config:", err)
		os.Exit(2)
	}
	if err := api.Generate(cfg, api.AddPlugin(serialMutations{})); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(3)
	}
}
