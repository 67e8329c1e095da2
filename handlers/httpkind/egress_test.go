package httpkind

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/turns"
)

// Issue 11: the http kind sends turns only where the server allows.
func TestEgressRefusesInternalAddressesByDefault(t *testing.T) {
	t.Parallel()
	def, err := ParseEgress(nil)
	require.NoError(t, err)
	for _, ip := range []string{"127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fc00::1", "100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "255.255.255.255"} {
		require.False(t, def.Allowed(netip.MustParseAddr(ip)), ip)
	}
	for _, ip := range []string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "100.128.0.1"} {
		require.True(t, def.Allowed(netip.MustParseAddr(ip)), ip)
	}
	some, err := ParseEgress([]string{"10.1.0.0/16", " 127.0.0.1 ", ""})
	require.NoError(t, err)
	require.True(t, some.Allowed(netip.MustParseAddr("10.1.200.3")))
	require.False(t, some.Allowed(netip.MustParseAddr("10.2.0.1")))
	require.True(t, some.Allowed(netip.MustParseAddr("127.0.0.1")))
	require.True(t, some.Allowed(netip.MustParseAddr("::ffff:127.0.0.1")))
	require.False(t, some.Allowed(netip.MustParseAddr("127.0.0.2")))
	_, err = ParseEgress([]string{"not-an-address"})
	require.ErrorContains(t, err, "not-an-address")
}

func TestEgressRefusesAtCreateAndAtDial(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	secret := strings.Repeat("s", 16)
	for _, u := range []string{"http://127.0.0.1:9/t", "http://localhost/t", "https://LOCALHOST./t", "http://[::1]/t",
		"http://169.254.169.254/latest/meta-data", "http://10.0.0.1/", "http://x.localhost/"} {
		_, err := Kind(clk, nil).New(turns.Spec{Config: jsonvalue.Value(`{"url": "` + u + `", "secret": "` + secret + `"}`)})
		fe := fault.As(err)
		require.NotNil(t, fe, u)
		require.Equal(t, "config.url", fe.Field, u)
		require.Contains(t, fe.Message, "HTTP_ALLOW")
	}
	_, err := Kind(clk, nil).New(turns.Spec{Config: jsonvalue.Value(`{"url": "https://turns.example.com/t", "secret": "` + secret + `"}`)})
	require.NoError(t, err, "a public name is checked when dialled")

	// A name resolving to loopback passes create and is refused when dialled,
	// for good (not retried), and the receiver never sees the turn.
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	t.Cleanup(srv.Close)
	su, _ := url.Parse(srv.URL)
	var egress *Egress
	// Built directly: create's check would refuse localhost before any dial.
	h := &handler{cfg: Config{URL: "http://localhost:" + su.Port() + "/t", Secret: secret}, timeout: time.Second, clock: clk, client: egress.client()}
	_, err = h.Run(context.Background(), &turns.Request{ExecutionID: uuid.New(), Transcript: turns.NewTranscript(clk.Now)})
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrEgress), "%v", err)
	require.True(t, turns.IsPermanent(err))
	require.False(t, hit)
}
