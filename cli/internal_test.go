package cli

// Issue 12 CLI: the parts of the client commands that need no server:
// YAML and JSON documents to ActionInput with exact numbers, and a stream
// that resumes after a break.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/client"
)

func TestMain(m *testing.M) {
	// Reconnects wait milliseconds in tests, not seconds.
	firstBackoff, maxBackoff = 5*time.Millisecond, 20*time.Millisecond
	os.Exit(m.Run())
}

func TestYAMLNumbersAndScalars(t *testing.T) {
	t.Parallel()
	doc := `
id: a1
big: 123456789012345678901234567890
neg: -12345678901234567890
dec: 0.10000000000000000000000001
exp: 1.5e300
plus: +7
hex: 0x1F
octal: 0o17
under: 1_000
half: .5
dot: 5.
lead: 007.50
bools: [true, false, True]
nothing: ~
date: 2026-03-02
quoted: "12"
multi: |
  two
  lines
html: <b>&</b>
alias: &x {k: [1, 2]}
again: *x
`
	got, err := readActionDocument(strings.NewReader(doc), "doc")
	require.NoError(t, err)
	require.Equal(t, "a1", got.ID)
	require.Equal(t, `{"again":{"k":[1,2]},"alias":{"k":[1,2]},"big":123456789012345678901234567890,`+
		`"bools":[true,false,true],"date":"2026-03-02","dec":0.10000000000000000000000001,"dot":5,"exp":1.5e300,`+
		`"half":0.5,"hex":31,"html":"<b>&</b>","lead":7.50,"multi":"two\nlines\n","neg":-12345678901234567890,`+
		`"nothing":null,"octal":15,"plus":7,"quoted":"12","under":1000}`, string(got.Input))
}

func TestJSONDocumentPassesThrough(t *testing.T) {
	t.Parallel()
	got, err := readActionDocument(strings.NewReader(` {"id": "a1", "config": {"n": 1.000000000000000000001, "s": "<\u00e9>"}, "name": "x"} `), "doc")
	require.NoError(t, err)
	require.Equal(t, "a1", got.ID)
	require.Equal(t, `{"config":{"n":1.000000000000000000001,"s":"<\u00e9>"},"name":"x"}`, string(got.Input))
}

func TestDocumentRefusals(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"":                         "empty document",
		"id: a\nx: .nan\n":         "not a number JSON can hold",
		"id: a\nx: -.inf\n":        "not a number JSON can hold",
		"id: a\nx: !!int 12abc\n":  "write it in decimal",
		"id: a\nx: {a: 1, a: 2}\n": `"a" appears twice`,
		"id: a\n? [k]\n: v\n":      "a key must be a plain value",
		`{"id": 5}`:                "id must be a string",
		`{"id": "a"`:               "not valid JSON",
	} {
		_, err := readActionDocument(strings.NewReader(doc), "doc")
		require.ErrorContains(t, err, want, "%q", doc)
		require.Equal(t, ExitUsage, ExitCode(err))
	}
	bomb := "id: a\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'k'; i++ {
		bomb += fmt.Sprintf("%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	_, err := readActionDocument(strings.NewReader(bomb), "doc")
	require.ErrorContains(t, err, "more than 1000000 values")
}

func TestClipKeepsRunesWhole(t *testing.T) {
	t.Parallel()
	require.Equal(t, "héllo", clip("héllo", 5))
	require.Equal(t, "hé…", clip("héllo", 3))
	require.Equal(t, "a b", oneLine("a\tb"))
}

// fakeLedger answers ledgerEvents over SSE: the first stream breaks after
// one event, the second must resume after it.
type fakeLedger struct {
	mu     sync.Mutex
	afters []any
}

func (f *fakeLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct{ Variables map[string]any }
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	f.afters = append(f.afters, req.Variables["after"])
	n := len(f.afters)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(pos int) string {
		return fmt.Sprintf(`event: next`+"\n"+`data: {"data":{"ledgerEvents":{"id":"e%d","eventType":"t.x","data":{},"commitTime":"2026-03-02T09:00:00Z","position":"%d","record":null}}}`+"\n\n", pos, pos)
	}
	if n == 1 {
		fmt.Fprint(w, ev(1)) // then the connection ends without complete
		return
	}
	fmt.Fprint(w, ev(2)+"event: complete\n\n")
}

// Issue 12 CLI, events tail: after a break the stream is opened again
// after the last event printed, so nothing is skipped or repeated.
func TestEventsTailResumesAfterABreak(t *testing.T) {
	t.Parallel()
	f := &fakeLedger{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	env := &Env{Client: c, JSON: true, IO: IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}}
	require.NoError(t, (&EventsTailCmd{}).Run(context.Background(), env))
	require.Equal(t, []any{nil, "1"}, f.afters)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], `"position":"1"`)
	require.Contains(t, lines[1], `"position":"2"`)
	require.Contains(t, errOut.String(), "reconnecting")
}

// A stream that keeps breaking gives up after maxReconnects tries: exit 3.
func TestStreamGivesUpAfterRepeatedBreaks(t *testing.T) {
	t.Parallel()
	n := 0
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if !first {
			http.Error(w, "gone", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": hello\n\n")
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	require.NoError(t, err)
	env := &Env{Client: c, IO: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}}
	err = (&EventsTailCmd{}).Run(context.Background(), env)
	require.Equal(t, ExitUnreachable, ExitCode(err), "%v", err)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1+maxReconnects, n)
}
