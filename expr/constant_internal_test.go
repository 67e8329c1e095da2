package expr

import (
	"strings"
	"testing"
	"time"
)

// TestFoldingWorkBounded_Issue10: however many costly constant parts an
// expression holds, one fold makes at most maxFoldCalls calls (plus the
// call that finds the counter over) and the evaluations of constant parts
// spend at most maxClosedCost plus the last evaluation's MaxCost.
func TestFoldingWorkBounded_Issue10(t *testing.T) {
	const nest = `[1,2,3,4,5,6,7,8,9,10].exists(a, [1,2,3,4,5,6,7,8,9,10].exists(b, [1,2,3,4,5,6,7,8,9,10].exists(c, ` +
		`[1,2,3,4,5,6,7,8,9,10].exists(d, [1,2,3,4,5,6,7,8,9,10].exists(e, a+b+c+d+e < 0)))))`
	conds := []string{`event.type == "e"`}
	for len(strings.Join(conds, " && ")) < MaxSourceBytes-len(nest)-10 {
		conds = append(conds, nest)
	}
	p, err := Compile(StartPredicate, strings.Join(conds, " && "))
	if err != nil {
		t.Fatal(err)
	}
	all, err := envs()
	if err != nil {
		t.Fatal(err)
	}
	fe, pool, err := takeFoldEnv(all[StartPredicate])
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Put(fe)
	start := time.Now()
	if _, err := foldWith(fe, p.ast); err != nil {
		t.Fatal(err)
	}
	folding := time.Since(start)
	if got := fe.calls.n.Load(); got < maxFoldCalls || got > maxFoldCalls+int64(len(conds))*maxFoldPasses*2 {
		t.Fatalf("one fold made %d calls; the bound is %d", got, maxFoldCalls)
	}
	why, never := p.NeverTrue()
	if !never || !strings.Contains(why, "too costly") {
		t.Fatalf("NeverTrue = %q, %v; want a condition over the cost limit", why, never)
	}
	if p.spent > maxClosedCost+MaxCost {
		t.Fatalf("constant evaluations spent %d; the bound is %d", p.spent, maxClosedCost+MaxCost)
	}
	t.Logf("%d conditions; fold calls %d in %s, constant evaluations spent %d", len(conds), fe.calls.n.Load(), folding, p.spent)
}
