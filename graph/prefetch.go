package graph

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
	"github.com/actionsledger/actionsledger/turns"
)

// A connection's resolver prefetches (issue 14): once it has its nodes, it
// reads ahead what their selection asks for, level by level, and primes the
// request's loaders with it. All reads of one level (the nodes' inputs,
// executions, transcripts and children; then the inputs' events and the
// children's actions) go in one pgx.Batch: one round trip, one snapshot.
// The seed's session query thus costs the same few round trips however many
// turns, entries and children it lists, and that does not depend on how the
// resolvers' goroutines happen to be scheduled (a loader's batch, gathered
// over a short wait, splits when they run late).
//
// A prefetch only saves reads: when one fails, the fields read for
// themselves and report the error.

// prefetch is one prefetch: the reads of the level being built, each with
// what to do once they are read (prime loaders, add the next level's reads).
type prefetch struct {
	r     *Resolver
	ls    *loaders
	op    *graphql.OperationContext
	level []prefetchRead
}

type prefetchRead struct {
	queue func(b *pgx.Batch)
	then  func()
}

// newPrefetch returns a prefetch for ctx's request, or nil when it has no
// loaders to prime.
func (r *Resolver) newPrefetch(ctx context.Context) *prefetch {
	ls := loadersFrom(ctx)
	if ls == nil || r.DB == nil || !graphql.HasOperationContext(ctx) || graphql.GetFieldContext(ctx) == nil {
		return nil
	}
	return &prefetch{r: r, ls: ls, op: graphql.GetOperationContext(ctx)}
}

// nodes returns the selection of the nodes of the connection being resolved.
func nodesSelection(ctx context.Context, connection string) ast.SelectionSet {
	var sel ast.SelectionSet
	for _, f := range graphql.CollectFieldsCtx(ctx, []string{connection}) {
		if f.Name == "nodes" {
			sel = append(sel, f.Selections...)
		}
	}
	return sel
}

// prefetchTurns reads ahead for the nodes of a session's turns connection.
func (r *Resolver) prefetchTurns(ctx context.Context, list []turns.Turn) {
	if p := r.newPrefetch(ctx); p != nil && len(list) > 0 {
		p.turns(nodesSelection(ctx, "ActionSessionTurnConnection"), list)
		p.run(ctx)
	}
}

// prefetchInputs reads ahead for the nodes of a session's inputs connection.
func (r *Resolver) prefetchInputs(ctx context.Context, list []session.Input) {
	if p := r.newPrefetch(ctx); p != nil && len(list) > 0 {
		p.inputs(nodesSelection(ctx, "ActionSessionInputConnection"), list)
		p.run(ctx)
	}
}

// prefetchInbox reads ahead for the nodes of an inbox page (issue 12): the
// items' actions (with their definitions), their sessions' actions, the
// approvals' tool versions and the executions, with their turns.
func (r *Resolver) prefetchInbox(ctx context.Context, items []session.InboxItem) {
	if p := r.newPrefetch(ctx); p != nil && len(items) > 0 {
		p.inbox(nodesSelection(ctx, "InboxConnection"), items)
		p.run(ctx)
	}
}

func (p *prefetch) inbox(sel ast.SelectionSet, items []session.InboxItem) {
	actionIDs := make([]uuid.UUID, len(items))
	execIDs := make([]uuid.UUID, len(items))
	for i, it := range items {
		actionIDs[i], execIDs[i] = it.Session.ActionID, it.ExecutionID
	}
	for _, f := range p.fields(sel, "InboxItem") {
		switch f.Name {
		case "action":
			p.actions(f.Selections, actionIDs)
		case "session":
			for _, g := range p.fields(f.Selections, "ActionSession") {
				if g.Name == "action" {
					p.actions(g.Selections, actionIDs)
				}
			}
		case "execution":
			p.executions(f.Selections, execIDs, nil)
		case "approval":
			var approvals []session.InboxItem
			for _, it := range items {
				if it.Kind == session.InterruptApproval {
					approvals = append(approvals, it)
				}
			}
			if len(approvals) > 0 {
				p.approvals(f.Selections, approvals)
			}
		}
	}
}

func (p *prefetch) approvals(sel ast.SelectionSet, items []session.InboxItem) {
	rights := false
	for _, f := range p.fields(sel, "ApprovalRequest") {
		switch f.Name {
		case "mayApprove", "mayReplaceInput":
			if !rights {
				rights = true
				p.answerRights(items)
			}
		case "execution":
			ids := make([]uuid.UUID, len(items))
			for i, it := range items {
				ids[i] = it.ExecutionID
			}
			p.executions(f.Selections, ids, nil)
		case "toolAction":
			var keys []action.VersionKey
			for _, it := range items {
				if it.ToolActionID != nil && it.ToolVersion != nil {
					keys = append(keys, action.VersionKey{ActionID: *it.ToolActionID, Version: *it.ToolVersion})
				}
			}
			if len(keys) == 0 {
				continue
			}
			into := map[action.VersionKey]*action.Version{}
			p.add(func(b *pgx.Batch) { action.QueueVersions(b, keys, into) }, func() {
				l := lazy(p.ls, &p.ls.versions, p.r.ActionStore.VersionsByKey)
				for _, k := range keys {
					l.Prime(k, into[k])
				}
			})
		}
	}
}

// answerRights reads what ApprovalRequest.mayApprove and mayReplaceInput
// look at (see answerRights): the executions that paused (their actions),
// the tool versions the requests name and the tools' current versions.
func (p *prefetch) answerRights(items []session.InboxItem) {
	execIDs := make([]uuid.UUID, len(items))
	var tools []uuid.UUID
	var keys []action.VersionKey
	for i, it := range items {
		execIDs[i] = it.ExecutionID
		if it.ToolActionID != nil && it.ToolVersion != nil {
			tools = append(tools, *it.ToolActionID)
			keys = append(keys, action.VersionKey{ActionID: *it.ToolActionID, Version: *it.ToolVersion})
		}
	}
	execs := map[uuid.UUID]*turns.Execution{}
	acts := map[uuid.UUID]*action.Action{}
	current := map[action.VersionKey]*action.Version{}
	recorded := map[action.VersionKey]*action.Version{}
	p.add(func(b *pgx.Batch) {
		turns.QueueExecutions(b, execIDs, execs)
		if len(tools) > 0 {
			action.QueueActions(b, tools, acts, current)
			action.QueueVersions(b, keys, recorded)
		}
	}, func() {
		xl := lazy(p.ls, &p.ls.executions, p.r.TurnStore.Executions)
		for _, id := range execIDs {
			xl.Prime(id, execs[id])
		}
		al := lazy(p.ls, &p.ls.actions, p.r.ActionStore.GetMany)
		for _, id := range tools {
			al.Prime(id, acts[id])
		}
		vl := lazy(p.ls, &p.ls.versions, p.r.ActionStore.VersionsByKey)
		for k, v := range current {
			vl.Prime(k, v)
		}
		for _, k := range keys {
			vl.Prime(k, recorded[k])
		}
	})
}

// run sends the levels' reads, one batch per level, until a level adds none.
func (p *prefetch) run(ctx context.Context) {
	for len(p.level) > 0 {
		level := p.level
		p.level = nil
		b := &pgx.Batch{}
		for _, rd := range level {
			rd.queue(b)
		}
		if err := p.r.DB.SendBatch(ctx, b).Close(); err != nil {
			return
		}
		for _, rd := range level {
			rd.then()
		}
	}
}

func (p *prefetch) add(queue func(b *pgx.Batch), then func()) {
	p.level = append(p.level, prefetchRead{queue, then})
}

func (p *prefetch) fields(sel ast.SelectionSet, typ string) []graphql.CollectedField {
	if len(sel) == 0 {
		return nil
	}
	return graphql.CollectFields(p.op, sel, []string{typ})
}

func (p *prefetch) turns(sel ast.SelectionSet, list []turns.Turn) {
	for _, f := range p.fields(sel, "ActionSessionTurn") {
		switch f.Name {
		case "inputs":
			refs := make([]session.TurnRef, len(list))
			for i, t := range list {
				refs[i] = session.TurnRef{SID: t.SID, Turn: t.Number}
			}
			into := map[session.TurnRef][]session.Input{}
			p.add(func(b *pgx.Batch) { session.QueueTurnInputs(b, refs, into) }, func() {
				l := lazyTurnInputs(p.r, p.ls)
				var all []session.Input
				for _, ref := range refs {
					l.Prime(ref, into[ref])
					all = append(all, into[ref]...)
				}
				p.inputs(f.Selections, all)
			})
		case "execution":
			ids := make([]uuid.UUID, len(list))
			for i, t := range list {
				ids[i] = t.ExecutionID
			}
			p.executions(f.Selections, ids, nil)
		}
	}
}

func (p *prefetch) inputs(sel ast.SelectionSet, list []session.Input) {
	for _, f := range p.fields(sel, "ActionSessionInput") {
		var ids []uuid.UUID
		for _, in := range list {
			switch {
			case f.Name == "event" && in.EventID != nil:
				ids = append(ids, *in.EventID)
			case f.Name == "execution" && in.ExecutionID != nil:
				ids = append(ids, *in.ExecutionID)
			case f.Name == "caller" && in.CallerExecutionID != nil:
				ids = append(ids, *in.CallerExecutionID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		if f.Name != "event" {
			p.executions(f.Selections, ids, nil)
			continue
		}
		into := map[uuid.UUID]ledger.Event{}
		p.add(func(b *pgx.Batch) { ledger.QueueEventsByID(b, ids, into) }, func() {
			l := p.ls.eventLoader()
			for _, id := range ids {
				var ev *ledger.Event
				if e, ok := into[id]; ok {
					ev = &e
				}
				l.Prime(id, ev)
			}
		})
	}
}

// executions reads ahead for executions with the given ids; list holds
// them when they are read already (children pages), else they are read too.
func (p *prefetch) executions(sel ast.SelectionSet, ids []uuid.UUID, list []turns.Execution) {
	fields := p.fields(sel, "Execution")
	if len(fields) == 0 {
		return
	}
	if list == nil {
		into := map[uuid.UUID]*turns.Execution{}
		p.add(func(b *pgx.Batch) { turns.QueueExecutions(b, ids, into) }, func() {
			l := lazy(p.ls, &p.ls.executions, p.r.TurnStore.Executions)
			var found []turns.Execution
			for _, id := range ids {
				l.Prime(id, into[id])
				if x := into[id]; x != nil {
					found = append(found, *x)
				}
			}
			p.executionActions(fields, found)
		})
	} else {
		p.executionActions(fields, list)
	}
	for _, f := range fields {
		switch f.Name {
		case "invocation":
			for _, g := range p.fields(f.Selections, "Invocation") {
				if g.Name == "transcript" {
					p.transcripts(g, ids)
				}
			}
		case "children":
			p.children(f, ids)
		}
	}
}

// executionActions reads ahead for the executions in list (read already):
// their actions and their turns.
func (p *prefetch) executionActions(fields []graphql.CollectedField, list []turns.Execution) {
	for _, f := range fields {
		if len(list) == 0 {
			return
		}
		switch f.Name {
		case "action":
			ids := make([]uuid.UUID, len(list))
			for i, x := range list {
				ids[i] = x.ActionID
			}
			p.actions(f.Selections, ids)
		case "turn":
			p.turnsOf(list)
		}
	}
}

// turnsOf reads ahead the turns the executions in list ran.
func (p *prefetch) turnsOf(list []turns.Execution) {
	var keys []turns.TurnKey
	for _, x := range list {
		if x.SID != nil && x.Turn != nil {
			keys = append(keys, turns.TurnKey{SID: *x.SID, Number: *x.Turn})
		}
	}
	if len(keys) == 0 {
		return
	}
	into := map[turns.TurnKey]*turns.Turn{}
	p.add(func(b *pgx.Batch) { turns.QueueTurns(b, keys, into) }, func() {
		l := lazy(p.ls, &p.ls.turns, p.r.TurnStore.TurnsByKey)
		for _, k := range keys {
			l.Prime(k, into[k])
		}
	})
}

func (p *prefetch) actions(sel ast.SelectionSet, ids []uuid.UUID) {
	into := map[uuid.UUID]*action.Action{}
	var current map[action.VersionKey]*action.Version
	for _, f := range p.fields(sel, "Action") {
		if f.Name == "definition" {
			current = map[action.VersionKey]*action.Version{}
		}
	}
	p.add(func(b *pgx.Batch) { action.QueueActions(b, ids, into, current) }, func() {
		l := lazy(p.ls, &p.ls.actions, p.r.ActionStore.GetMany)
		for _, id := range ids {
			l.Prime(id, into[id])
		}
		v := lazy(p.ls, &p.ls.versions, p.r.ActionStore.VersionsByKey)
		for k, ver := range current {
			v.Prime(k, ver)
		}
	})
}

func (p *prefetch) transcripts(f graphql.CollectedField, ids []uuid.UUID) {
	n, from, ok := p.page(f, "entry")
	afterSeq, err := cursorNumber(from)
	if !ok || err != nil {
		return
	}
	into := map[uuid.UUID][]turns.Entry{}
	p.add(func(b *pgx.Batch) { turns.QueueTranscripts(b, ids, int(afterSeq), n+1, into) }, func() {
		l := lazyTranscripts(p.r, p.ls)
		for _, id := range ids {
			l.Prime(transcriptKey{exec: id, afterSeq: int(afterSeq), limit: n + 1}, into[id])
		}
	})
}

func (p *prefetch) children(f graphql.CollectedField, ids []uuid.UUID) {
	n, from, ok := p.page(f, "execution")
	afterID, err := cursorUUID(from)
	if !ok || err != nil {
		return
	}
	into := map[uuid.UUID][]turns.Execution{}
	p.add(func(b *pgx.Batch) { turns.QueueChildren(b, ids, afterID, n+1, into) }, func() {
		l := lazyChildren(p.r, p.ls)
		var shown []turns.Execution
		for _, id := range ids {
			l.Prime(childrenKey{parent: id, afterID: afterID, limit: n + 1}, into[id])
			page, _ := trim(into[id], n)
			shown = append(shown, page...)
		}
		var sel ast.SelectionSet
		for _, g := range p.fields(f.Selections, "ExecutionConnection") {
			if g.Name == "nodes" {
				sel = append(sel, g.Selections...)
			}
		}
		childIDs := make([]uuid.UUID, len(shown))
		for i, x := range shown {
			childIDs[i] = x.ID
		}
		if len(shown) > 0 {
			p.executions(sel, childIDs, shown)
		}
	})
}

// page reads a connection field's first and after arguments as paginate
// would (after is the cursor's value); ok is false when they are not valid,
// and then the field reports it.
func (p *prefetch) page(f graphql.CollectedField, kind string) (n int, from string, ok bool) {
	args := f.ArgumentMap(p.op.Variables)
	var first *int
	if v, present := args["first"]; present && v != nil {
		i, isInt := intArg(v)
		if !isInt {
			return 0, "", false
		}
		first = &i
	}
	n, err := pageSize(first)
	if err != nil {
		return 0, "", false
	}
	var after *string
	if v, present := args["after"]; present && v != nil {
		s, isString := v.(string)
		if !isString {
			return 0, "", false
		}
		after = &s
	}
	from, err = decodeCursor(after, kind)
	return n, from, err == nil
}

// intArg reads an Int argument as the request carries it: a literal or a
// variable (a json.Number when the body was decoded with numbers kept).
func intArg(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int32:
		return int(x), true
	case int64:
		return int(x), x == int64(int(x))
	case json.Number:
		i, err := strconv.Atoi(string(x))
		return i, err == nil
	case float64:
		return int(x), x == float64(int(x))
	}
	return 0, false
}
