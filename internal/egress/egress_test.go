package egress

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 11: requests go only where the server allows.
func TestEgressRefusesInternalAddressesByDefault(t *testing.T) {
	t.Parallel()
	def, err := Parse(nil)
	require.NoError(t, err)
	for _, ip := range []string{"127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fc00::1", "100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "255.255.255.255"} {
		require.False(t, def.Allowed(netip.MustParseAddr(ip)), ip)
	}
	for _, ip := range []string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "100.128.0.1"} {
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
}
