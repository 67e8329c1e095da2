package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph/model"
	"github.com/actionsledger/actionsledger/session"
)

// inboxFilter is what the principal p may see of the inbox (issue 12): the
// interrupts of the actions it may READ, filtered in SQL, optionally of one
// kind and one action. A handler credential sees nothing.
func inboxFilter(p auth.Principal, kind *model.InterruptKind, actionID *uuid.UUID) session.InboxFilter {
	f := session.InboxFilter{ActionID: actionID}
	if kind != nil {
		k := string(*kind)
		f.Kind = &k
	}
	if p.Session == nil {
		f.AllActions, f.Readable = p.ReadableActions()
	}
	return f
}

// inbox pages the inbox: one statement for the page and its count, then
// one round trip per level of what the nodes' selection reaches (prefetch).
func (r *Resolver) inbox(ctx context.Context, first *int, after *string, kind *model.InterruptKind, actionID *uuid.UUID) (*model.InboxConnection, error) {
	p, _ := auth.From(ctx)
	f := inboxFilter(p, kind, actionID)
	n, err := pageSize(first)
	if err != nil {
		return nil, err
	}
	from, err := decodeCursor(after, "inbox")
	if err != nil {
		return nil, err
	}
	ord, err := cursorNumber(from)
	if err != nil {
		return nil, err
	}
	items, total, err := r.SessionStore.Inbox(ctx, f, ord, n+1)
	if err != nil {
		return nil, err
	}
	items, more := trim(items, n)
	end := after
	if len(items) > 0 {
		end = cursorInt("inbox", items[len(items)-1].Ord)
	}
	r.prefetchInbox(ctx, items)
	return &model.InboxConnection{Nodes: items, PageInfo: pageInfo(more, end), TotalCount: total}, nil
}
