package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/internal/pgtest"
)

// Issue 11: the namespace of an event type is the text before its first dot.
func TestEventNamespaceAndLedgerResource(t *testing.T) {
	t.Parallel()
	for typ, ns := range map[string]string{"entry.inserted": "entry", "audit": "audit", "a.b.c": "a", ".x": ""} {
		require.Equal(t, ns, auth.EventNamespace(typ), typ)
	}
	require.Equal(t, "ledger", auth.LedgerResource(auth.AllNamespaces))
	require.Equal(t, "ledger:entry", auth.LedgerResource("entry"))
}

func TestGrantsNormalizeAndUnion(t *testing.T) {
	t.Parallel()
	a, b := uuid.MustParse("00000000-0000-4000-8000-000000000002"), uuid.MustParse("00000000-0000-4000-8000-000000000001")
	require.Equal(t, auth.Grants{Read: []string{}, Write: []string{}, Tools: []uuid.UUID{}, Sessions: []uuid.UUID{}}, auth.Grants{}.Normalize(),
		"never nil, so an empty grant reads and compares the same")
	g := auth.Grants{Read: []string{"payroll", "entry", "payroll"}, Tools: []uuid.UUID{a, b, a}}
	h := auth.Grants{Read: []string{"audit"}, Write: []string{"entry"}, Sessions: []uuid.UUID{b}}
	require.Equal(t, auth.Grants{Read: []string{"audit", "entry", "payroll"}, Write: []string{"entry"}, Tools: []uuid.UUID{b, a}, Sessions: []uuid.UUID{b}},
		g.Union(h))
	require.Equal(t, []string{"payroll", "entry", "payroll"}, g.Read, "Union and Normalize leave their receiver alone")
}

// What a version may do = its grants ∩ its author's current policies; dev
// mode reaches every namespace and tool but still needs a sessions grant;
// a nil Authority allows nothing.
func TestAuthorityIsGrantsIntersectedWithPolicies(t *testing.T) {
	t.Parallel()
	tool, other := uuid.New(), uuid.New()
	author := auth.Principal{ID: "ann", Policies: []auth.Policy{
		{Action: auth.Read, Resource: "ledger:entry"}, {Action: auth.Read, Resource: "ledger:payroll"},
		{Action: auth.Write, Resource: "ledger:entry"},
		{Action: auth.Call, Resource: auth.ActionResource(tool)},
		{Action: auth.Read, Resource: auth.ActionResource(other)},
	}}
	a := &auth.Authority{Grants: auth.Grants{Read: []string{"entry", "audit"}, Write: []string{"entry", "payroll"},
		Tools: []uuid.UUID{tool, other}, Sessions: []uuid.UUID{other, tool}}, Author: author}
	require.True(t, a.MayRead("entry"))
	require.False(t, a.MayRead("payroll"), "held but not granted")
	require.False(t, a.MayRead("audit"), "granted but not held")
	require.True(t, a.MayWrite("entry"))
	require.False(t, a.MayWrite("payroll"))
	require.True(t, a.MayCall(tool))
	require.False(t, a.MayCall(other), "READ is not CALL")
	require.True(t, a.MayReadSessions(other))
	require.False(t, a.MayReadSessions(tool), "CALL is not READ")

	star := &auth.Authority{Grants: auth.Grants{Read: []string{auth.AllNamespaces}, Write: []string{auth.AllNamespaces}},
		Author: auth.Principal{ID: "root", Policies: []auth.Policy{{Action: auth.Admin, Resource: auth.All}}}}
	require.True(t, star.MayRead("anything"))
	require.True(t, star.MayWrite("anything"))
	require.False(t, star.MayCall(tool), "no tool granted")

	writer := &auth.Authority{Grants: auth.Grants{Tools: []uuid.UUID{tool}},
		Author: auth.Principal{ID: "w", Policies: []auth.Policy{{Action: auth.Write, Resource: auth.ActionResource(tool)}}}}
	require.True(t, writer.MayCall(tool), "WRITE on a tool covers CALL")

	dev := &auth.Authority{Unrestricted: true, Grants: auth.Grants{Sessions: []uuid.UUID{other}}}
	require.True(t, dev.MayRead("payroll"))
	require.True(t, dev.MayWrite("payroll"))
	require.True(t, dev.MayCall(uuid.New()))
	require.True(t, dev.MayReadSessions(other))
	require.False(t, dev.MayReadSessions(tool), "T10: sessions need a grant in every mode")

	var none *auth.Authority
	require.False(t, none.MayRead("entry"))
	require.False(t, none.MayWrite("entry"))
	require.False(t, none.MayCall(tool))
	require.False(t, none.MayReadSessions(other))
}

func TestCheckStoreNamesEveryMissingGrant(t *testing.T) {
	t.Parallel()
	p := auth.Principal{ID: "ann", Policies: []auth.Policy{{Action: auth.Read, Resource: "ledger:entry"}}}
	errs := auth.CheckStore(p, []auth.Need{
		{Action: auth.Read, Resource: "ledger:entry", Field: "triggers[0].event", What: "read entry"},
		{Action: auth.Read, Resource: "ledger:payroll", Field: "permissions.read[0]", What: "read ledger namespace payroll"},
		{Action: auth.Write, Resource: "ledger:entry", Field: "permissions.write[0]", What: "write ledger namespace entry"},
	})
	require.Len(t, errs, 2)
	for i, field := range []string{"permissions.read[0]", "permissions.write[0]"} {
		fe := fault.As(errs[i])
		require.Equal(t, fault.Forbidden, fe.Code)
		require.Equal(t, field, fe.Field)
	}
	require.Contains(t, fault.As(errs[0]).Message, "read ledger namespace payroll")
	require.Empty(t, auth.CheckStore(auth.Principal{Dev: true}, []auth.Need{{Action: auth.Admin, Resource: auth.All}}))
}

// Authorities: without enforcement every authority is unrestricted; with
// it, an author's policies are read from the database and cached until
// the policy epoch moves (any principal's policies change), the dev
// principal (and a version without an author) holds nothing, and the
// admin principal holds everything only while the server has an
// ADMIN_TOKEN.
func TestAuthoritiesFollowThePolicyEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	store := auth.NewStore(pool, clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)))
	grants := auth.Grants{Read: []string{"payroll"}}

	off, err := auth.NewAuthorities(pool, false, false).For(ctx, nil, "anyone", grants)
	require.NoError(t, err)
	require.True(t, off.Unrestricted)
	require.False(t, auth.NewAuthorities(pool, false, false).Enforced())
	var nilResolver *auth.Authorities
	require.False(t, nilResolver.Enforced())

	r := auth.NewAuthorities(pool, true, false)
	require.True(t, r.Enforced())
	e0, err := auth.Epoch(ctx, pool)
	require.NoError(t, err)
	_, err = store.CreateToken(ctx, "ann", []auth.Policy{{Action: auth.Read, Resource: "ledger:payroll"}})
	require.NoError(t, err)
	e1, err := auth.Epoch(ctx, pool)
	require.NoError(t, err)
	require.Greater(t, e1, e0, "changing policies moves the epoch")

	a, err := r.For(ctx, nil, "ann", grants)
	require.NoError(t, err)
	require.True(t, a.MayRead("payroll"))
	// Changed behind the resolver's back (no epoch bump): the cache stands.
	_, err = pool.Exec(ctx, `DELETE FROM auth_policies WHERE principal_id = 'ann'`)
	require.NoError(t, err)
	a, err = r.For(ctx, nil, "ann", grants)
	require.NoError(t, err)
	require.True(t, a.MayRead("payroll"), "cached at the same epoch")
	// Through the store: the epoch moves and the next For reads them again.
	_, err = store.CreateToken(ctx, "ann", []auth.Policy{{Action: auth.Read, Resource: "ledger:entry"}})
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	a, err = r.For(ctx, tx, "ann", grants) // through a transaction, as a turn does
	require.NoError(t, err)
	require.False(t, a.MayRead("payroll"))
	require.NoError(t, tx.Rollback(ctx))

	for _, author := range []string{auth.DevID, ""} {
		a, err = r.For(ctx, nil, author, auth.Grants{Read: []string{auth.AllNamespaces}})
		require.NoError(t, err)
		require.False(t, a.MayRead("entry"), "author %q holds nothing under AUTH", author)
	}
	a, err = r.For(ctx, nil, auth.AdminID, grants)
	require.NoError(t, err)
	require.False(t, a.MayRead("payroll"), "without ADMIN_TOKEN admin holds what is stored for it: nothing")
	a, err = auth.NewAuthorities(pool, true, true).For(ctx, nil, auth.AdminID, grants)
	require.NoError(t, err)
	require.True(t, a.MayRead("payroll"), "with ADMIN_TOKEN admin holds ADMIN on *")
	require.False(t, a.MayRead("entry"), "still bounded by the version's grants")
}
