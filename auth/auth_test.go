package auth_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/internal/fault"
)

// Issue 6 (authorisation): the resource grammar and what covers what.
func TestAllows(t *testing.T) {
	t.Parallel()
	a, b := uuid.New(), uuid.New()
	p := auth.Principal{ID: "p", Policies: []auth.Policy{
		{Action: auth.Respond, Resource: auth.ActionResource(a)},
		{Action: auth.Read, Resource: auth.ActionsDoc},
		{Action: auth.Write, Resource: auth.NamespaceResource("entry")},
		{Action: auth.Admin, Resource: auth.NamespaceResource("account")},
	}}
	require.True(t, p.Allows(auth.Respond, auth.ActionResource(a)))
	require.False(t, p.Allows(auth.Respond, auth.ActionResource(b)))
	require.False(t, p.Allows(auth.Close, auth.ActionResource(a)))
	require.True(t, p.Allows(auth.Read, auth.ActionResource(b)), "the document covers every action")
	require.True(t, p.Allows(auth.Read, auth.ActionsDoc))
	require.False(t, p.Allows(auth.Write, auth.ActionsDoc))
	require.True(t, p.Allows(auth.Write, auth.NamespaceResource("entry")))
	require.False(t, p.Allows(auth.Write, auth.NamespaceResource("entry2")))
	require.False(t, p.Allows(auth.Write, auth.LedgerPrefix), "one namespace does not cover the ledger")
	require.True(t, p.Allows(auth.Read, auth.NamespaceResource("account")), "ADMIN covers the other actions")
	require.False(t, p.Allows(auth.Admin, auth.All))

	admin := auth.Principal{ID: "admin", Policies: []auth.Policy{{Action: auth.Admin, Resource: auth.All}}}
	for _, r := range []string{auth.All, auth.ActionsDoc, auth.ActionResource(b), auth.LedgerPrefix, auth.NamespaceResource("x")} {
		for _, act := range []string{auth.Read, auth.Write, auth.Respond, auth.Close, auth.Admin} {
			require.True(t, admin.Allows(act, r), "%s on %s", act, r)
		}
	}
	require.True(t, auth.Principal{Dev: true}.Allows(auth.Admin, auth.All))
	require.False(t, auth.Principal{ID: "nobody"}.Allows(auth.Read, auth.LedgerPrefix))
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	for _, r := range []string{"*", "financial.Action.document", "financial.Action.document:" + id.String(), "ledger", "ledger:entry"} {
		require.NoError(t, auth.Policy{Action: auth.Read, Resource: r}.Check("p"), r)
	}
	for _, r := range []string{"", "ledger:", "financial.Action.document:nope", "financial.Action.document:" + uuid.New().String()[:8],
		"Financial.Action.document", "actions"} {
		err := auth.Policy{Action: auth.Read, Resource: r}.Check("p")
		require.Error(t, err, r)
		require.Equal(t, fault.BadInput, fault.As(err).Code)
		require.Equal(t, "p.resource", fault.As(err).Field)
	}
	err := auth.Policy{Action: "DELETE", Resource: "*"}.Check("p")
	require.Equal(t, "p.action", fault.As(err).Field)
}

func TestAllowWithoutPrincipal(t *testing.T) {
	t.Parallel()
	err := auth.Allow(context.Background(), auth.Read, auth.LedgerPrefix)
	require.Equal(t, fault.Forbidden, fault.As(err).Code)
	ctx := auth.With(context.Background(), auth.Principal{Dev: true})
	require.NoError(t, auth.Allow(ctx, auth.Admin, auth.All))
}

func TestTokenShape(t *testing.T) {
	t.Parallel()
	a, b := auth.NewToken(), auth.NewToken()
	require.NotEqual(t, a, b)
	require.Len(t, a, len(auth.TokenPrefix)+43, "32 bytes, base64url without padding")
	require.Len(t, auth.Hash(a), 32)
}
