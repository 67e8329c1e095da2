package egress

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 11: requests go only where the server allows.
func TestEgressRefusesInternalAddressesByDefault(t *testing.T) {
	t.Parallel()
	def, err := Parse(nil)
	require.NoError(t, err)
	for _, ip := range []string{"127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fc00::1", "100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "255.255.255.255",
		"198.18.0.1", "198.19.255.254", "240.0.0.1", "250.1.2.3", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1",
		"2002:7f00:1::1", "2002:a9fe:a9fe::1"} {
		require.False(t, def.Allowed(netip.MustParseAddr(ip)), ip)
	}
	for _, ip := range []string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "100.128.0.1", "198.20.0.1", "223.255.255.1", "64:ff9c::1"} {
		require.True(t, def.Allowed(netip.MustParseAddr(ip)), ip)
	}
	some, err := Parse([]string{"10.1.0.0/16", " 127.0.0.1 ", ""})
	require.NoError(t, err)
	require.True(t, some.Allowed(netip.MustParseAddr("10.1.200.3")))
	require.False(t, some.Allowed(netip.MustParseAddr("10.2.0.1")))
	require.True(t, some.Allowed(netip.MustParseAddr("127.0.0.1")))
	require.True(t, some.Allowed(netip.MustParseAddr("::ffff:127.0.0.1")))
	require.False(t, some.Allowed(netip.MustParseAddr("127.0.0.2")))
	_, err = Parse([]string{"not-an-address"})
	require.ErrorContains(t, err, "not-an-address")
	nat64, err := Parse([]string{"64:ff9b::/96"})
	require.NoError(t, err)
	require.True(t, nat64.Allowed(netip.MustParseAddr("64:ff9b::808:808")), "HTTP_ALLOW can allow a denied range")
}

// Issue 11: the client follows no redirect (a 3xx is the answer, so an
// allowed receiver cannot bounce a request elsewhere) and checks every
// address it dials.
func TestEgressClientFollowsNoRedirectAndChecksDials(t *testing.T) {
	t.Parallel()
	var hit atomic.Bool
	inner := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	t.Cleanup(inner.Close)
	var code atomic.Int64
	outer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/latest/meta-data", int(code.Load()))
	}))
	t.Cleanup(outer.Close)
	allowed, err := Parse([]string{"127.0.0.1"})
	require.NoError(t, err)
	for _, c := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		code.Store(int64(c))
		resp, err := allowed.Client().Post(outer.URL, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, c, resp.StatusCode)
		require.Equal(t, inner.URL+"/latest/meta-data", resp.Header.Get("Location"))
	}
	require.False(t, hit.Load(), "the redirect was not followed")

	// Without the allowance the loopback receiver is refused when dialled.
	def, err := Parse(nil)
	require.NoError(t, err)
	_, err = def.Client().Post(outer.URL, "application/json", strings.NewReader("{}"))
	require.ErrorIs(t, err, ErrRefused)
}
