package client_test

// Issue 12, CLI: the typed client's transport. Queries and mutations
// against the real server are covered end to end by package cli's tests;
// these pin the edges a real server does not produce on demand (non-GraphQL
// answers, broken streams) with small HTTP servers of their own.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/client"
)

func TestEndpointAcceptsBaseURLOrGraphQLPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                 "http://127.0.0.1:8080/graphql",
		"http://127.0.0.1:8080":            "http://127.0.0.1:8080/graphql",
		"http://127.0.0.1:8080/":           "http://127.0.0.1:8080/graphql",
		"http://127.0.0.1:8080/graphql":    "http://127.0.0.1:8080/graphql",
		"http://127.0.0.1:8080/graphql/":   "http://127.0.0.1:8080/graphql",
		"https://ledger.example/api":       "https://ledger.example/api/graphql",
		"https://ledger.example/x/graphql": "https://ledger.example/x/graphql",
	} {
		got, err := client.Endpoint(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://host/", "http://", "http://h/graphql?x=1", "http://u:p@h/"} {
		_, err := client.Endpoint(bad)
		require.Error(t, err, bad)
	}
}

// serve starts a test server answering with h.
func serve(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.Options{Token: "tok"})
	require.NoError(t, err)
	return c
}

func TestGraphQLErrorsKeepCodeFieldAndRetryable(t *testing.T) {
	t.Parallel()
	var auth string
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/graphql-response+json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"errors":[{"message":"no","path":["auth","principals"],"extensions":{"code":"UNAVAILABLE","field":"id","retryable":true}}],"data":null}`)
	})
	_, err := client.Principals(context.Background(), c, nil)
	require.Equal(t, "Bearer tok", auth)
	var re *client.ResponseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusUnauthorized, re.HTTPStatus)
	require.Equal(t, "UNAVAILABLE", client.CodeOf(err))
	require.Equal(t, client.Error{Message: "no", Code: "UNAVAILABLE", Field: "id", Retryable: true, Path: []any{"auth", "principals"}}, re.Errors[0])
	require.Equal(t, "UNAVAILABLE: no (field id)", err.Error())
}

func TestPartialDataComesWithTheErrors(t *testing.T) {
	t.Parallel()
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":{"ledger":{"appendEvent":null}},"errors":[{"message":"m","extensions":{"code":"RESERVED_EVENT_TYPE","field":"type"}}]}`)
	})
	r, err := client.AppendEvent(context.Background(), c, "x.y", []byte(`{}`), nil)
	require.Equal(t, "RESERVED_EVENT_TYPE", client.CodeOf(err))
	require.NotNil(t, r)
	require.Nil(t, r.Ledger.AppendEvent)
}

func TestNoGraphQLAnswerIsATransportError(t *testing.T) {
	t.Parallel()
	html := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html>bad gateway</html>")
	})
	_, err := client.Principals(context.Background(), html, nil)
	var te *client.TransportError
	require.ErrorAs(t, err, &te)
	require.Equal(t, http.StatusBadGateway, te.HTTPStatus)
	require.Contains(t, err.Error(), "not a GraphQL answer")
	require.Empty(t, client.CodeOf(err))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	down, err := client.New("http://"+addr, client.Options{})
	require.NoError(t, err)
	_, err = client.Principals(context.Background(), down, nil)
	require.ErrorAs(t, err, &te)
	require.Zero(t, te.HTTPStatus)
}

// sseServer answers a subscription with body, written as given.
func sseServer(t *testing.T, body func(w http.ResponseWriter, f http.Flusher, r *http.Request)) *client.Client {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			http.Error(w, "want SSE", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		fmt.Fprint(w, ":\n\n")
		f.Flush()
		body(w, f, r)
	})
}

const event1 = `{"data":{"ledgerEvents":{"id":"e1","eventType":"a.b","data":{"n":12345678901234567890},"commitTime":"2026-03-02T09:00:00Z","position":"1","record":null}}}`

func TestStreamDeliversEventsUntilComplete(t *testing.T) {
	t.Parallel()
	split := strings.Index(event1, `"eventType"`) // between two members
	c := sseServer(t, func(w http.ResponseWriter, f http.Flusher, _ *http.Request) {
		// A keep-alive, an event split over data lines with CRLF, an
		// unknown event, then complete.
		fmt.Fprint(w, ": ping\r\n\r\nevent: next\r\ndata: "+event1[:split]+"\r\ndata: "+event1[split:]+"\r\n\r\n")
		fmt.Fprint(w, "event: other\ndata: x\n\nevent: next\ndata: "+strings.Replace(event1, `"1"`, `"2"`, 1)+"\n\nevent: complete\n\n")
	})
	s, err := c.FollowLedgerEvents(context.Background(), nil, nil)
	require.NoError(t, err)
	defer s.Close()
	e, err := s.Next(context.Background())
	require.NoError(t, err)
	require.Equal(t, "1", e.Position)
	require.JSONEq(t, `{"n":12345678901234567890}`, string(e.Data))
	require.Equal(t, `{"n":12345678901234567890}`, strings.ReplaceAll(string(e.Data), "\n", ""), "numbers stay as written")
	e, err = s.Next(context.Background())
	require.NoError(t, err)
	require.Equal(t, "2", e.Position)
	_, err = s.Next(context.Background())
	require.ErrorIs(t, err, io.EOF)
}

// A JSON value may hold a number beyond float64's range (the server keeps
// it exact); a stream carries it as written instead of failing.
func TestStreamKeepsNumbersBeyondFloat64(t *testing.T) {
	t.Parallel()
	huge := strings.Replace(event1, `12345678901234567890`, `1e400`, 1)
	c := sseServer(t, func(w http.ResponseWriter, f http.Flusher, _ *http.Request) {
		fmt.Fprint(w, "event: next\ndata: "+huge+"\n\nevent: complete\n\n")
	})
	s, err := c.FollowLedgerEvents(context.Background(), nil, nil)
	require.NoError(t, err)
	defer s.Close()
	e, err := s.Next(context.Background())
	require.NoError(t, err)
	require.Equal(t, `{"n":1e400}`, strings.ReplaceAll(string(e.Data), " ", ""))
	_, err = s.Next(context.Background())
	require.ErrorIs(t, err, io.EOF)
}

func TestStreamWithoutCompleteIsABreak(t *testing.T) {
	t.Parallel()
	c := sseServer(t, func(w http.ResponseWriter, f http.Flusher, _ *http.Request) {
		fmt.Fprint(w, "event: next\ndata: "+event1+"\n\n")
	})
	s, err := c.FollowLedgerEvents(context.Background(), nil, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Next(context.Background())
	require.NoError(t, err)
	_, err = s.Next(context.Background())
	var te *client.TransportError
	require.ErrorAs(t, err, &te, "got %v", err)
}

func TestStreamErrorsKeepTheirCode(t *testing.T) {
	t.Parallel()
	c := sseServer(t, func(w http.ResponseWriter, f http.Flusher, _ *http.Request) {
		fmt.Fprint(w, `event: next`+"\n"+`data: {"errors":[{"message":"behind","extensions":{"code":"FORBIDDEN"}}],"data":null}`+"\n\nevent: complete\n\n")
	})
	s, err := c.FollowLedgerEvents(context.Background(), nil, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Next(context.Background())
	require.Equal(t, "FORBIDDEN", client.CodeOf(err))
}

// A server without subscriptions answers the POST with JSON: the refusal
// is the subscription's error.
func TestSubscriptionRefusedWithJSON(t *testing.T) {
	t.Parallel()
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"errors":[{"message":"subscriptions are not available yet","extensions":{"code":"NOT_IMPLEMENTED"}}],"data":null}`)
	})
	_, err := c.FollowSessionUpdates(context.Background(), "a", "s")
	require.Equal(t, "NOT_IMPLEMENTED", client.CodeOf(err))
}

// Close ends a stream whose server sends nothing more, and one whose
// reader holds an update nobody receives; Next then says ErrClosed.
func TestStreamCloseReleasesTheReader(t *testing.T) {
	t.Parallel()
	c := sseServer(t, func(w http.ResponseWriter, f http.Flusher, r *http.Request) {
		fmt.Fprint(w, "event: next\ndata: "+event1+"\n\nevent: next\ndata: "+event1+"\n\n")
		f.Flush()
		<-r.Context().Done()
	})
	s, err := c.FollowLedgerEvents(context.Background(), nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = s.Next(context.Background())
	require.True(t, errors.Is(err, client.ErrClosed), "got %v", err)
}

func TestStreamEndsWithItsContext(t *testing.T) {
	t.Parallel()
	c := sseServer(t, func(w http.ResponseWriter, f http.Flusher, r *http.Request) {
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.FollowLedgerEvents(ctx, nil, nil)
	require.NoError(t, err)
	defer s.Close()
	cancel()
	_, err = s.Next(context.Background())
	require.ErrorIs(t, err, context.Canceled)
}
