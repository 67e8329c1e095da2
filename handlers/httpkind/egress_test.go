package httpkind

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
	var rules *Egress
	// Built directly: create's check would refuse localhost before any dial.
	h := &handler{cfg: Config{URL: "http://localhost:" + su.Port() + "/t", Secret: secret}, timeout: time.Second, clock: clk, client: rules.Client()}
	_, err = h.Run(context.Background(), &turns.Request{ExecutionID: uuid.New(), Transcript: turns.NewTranscript(clk.Now)})
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrEgress), "%v", err)
	require.True(t, turns.IsPermanent(err))
	require.False(t, hit)
}
