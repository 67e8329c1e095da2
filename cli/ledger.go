package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/actionsledger/actionsledger/client"
)

// EventsCmd groups the event commands.
type EventsCmd struct {
	Tail EventsTailCmd `cmd:"" help:"Print events as they commit (ledgerEvents), optionally replaying those after a position first."`
}

// EventsTailCmd is `events tail [--type T] [--after CURSOR]` (issue 12).
type EventsTailCmd struct {
	Type  string `placeholder:"TYPE" help:"Only events of this type, e.g. entry.inserted."`
	After string `placeholder:"POSITION" help:"Replay the events after this position (an event's position; 0: the whole ledger) first; without it, only events committed from now on."`
	Limit int    `help:"Stop after this many events (0: follow until stopped)."`
}

// Run prints each event (JSON output: one per line) until --limit events
// were printed, the server ends the stream, or Ctrl-C (exit 0). After a
// broken connection it subscribes again after the last event printed, so
// nothing is skipped or repeated.
func (c *EventsTailCmd) Run(ctx context.Context, env *Env) error {
	if c.Limit < 0 {
		return usagef("--limit must be 0 or more")
	}
	after := ptr(c.After)
	c.pastHead(ctx, env)
	n := 0
	open := func(ctx context.Context) (updates[*client.LedgerEvent], error) {
		s, err := env.Client.FollowLedgerEvents(ctx, after, ptr(c.Type))
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return followLoop(ctx, env.Stderr, open, func(e *client.LedgerEvent) (bool, error) {
		pos := e.Position
		after = &pos
		n++
		if env.JSON {
			if err := writeJSON(env.Stdout, e, false); err != nil {
				return true, err
			}
		} else {
			rec := ""
			if e.Record != nil {
				if kv, ok := (*e.Record).(*client.LedgerEventRecordKVValue); ok {
					rec = fmt.Sprintf(" %s/%s v%d", kv.Namespace, kv.Key, kv.Version)
				}
			}
			fmt.Fprintf(env.Stdout, "%s  %s  %s%s  %s\n", e.Position, stamp(e.CommitTime), e.EventType, rec, clip(compact(e.Data), 200))
		}
		return c.Limit > 0 && n >= c.Limit, nil
	})
}

// pastHead says on standard error when --after is a position past the
// ledger's newest event: nothing is replayed, and the events up to that
// position will not be shown either when they commit. Silent when the head
// cannot be read (the subscription then reports why).
func (c *EventsTailCmd) pastHead(ctx context.Context, env *Env) {
	n, err := strconv.ParseInt(c.After, 10, 64)
	if err != nil || n <= 0 {
		return
	}
	r, err := client.LedgerHead(ctx, env.Client)
	if err != nil {
		return
	}
	var head int64
	if nodes := r.Ledger.RecentEvents.Nodes; len(nodes) > 0 {
		if head, err = strconv.ParseInt(nodes[0].Position, 10, 64); err != nil {
			return
		}
	}
	if n > head {
		fmt.Fprintf(env.Stderr, "actionsledger: --after %d is past the newest event (position %d): nothing to replay, and events are shown from position %d on; waiting\n", n, head, n+1)
	}
}

// jsonArg returns a JSON argument's bytes: the argument itself, or standard
// input for "-". Invalid JSON is a usage error.
func jsonArg(name, arg string, stdin io.Reader) (json.RawMessage, error) {
	raw := []byte(arg)
	if arg == "-" {
		var err error
		if raw, err = io.ReadAll(io.LimitReader(stdin, maxDocumentBytes+1)); err != nil {
			return nil, usagef("%s: %v", name, err)
		}
		if len(raw) > maxDocumentBytes {
			return nil, usagef("%s: larger than %d bytes", name, maxDocumentBytes)
		}
	}
	raw = []byte(strings.TrimSpace(string(raw)))
	if !utf8.Valid(raw) {
		return nil, usagef("%s is not valid UTF-8 text", name)
	}
	if !json.Valid(raw) {
		return nil, usagef("%s is not JSON: %s (quote strings: '\"text\"')", name, clip(oneLine(string(raw)), 60))
	}
	return raw, nil
}

// PutCmd is `put NS KEY JSON`: putValue (L1, L3).
type PutCmd struct {
	Namespace      string `arg:"" name:"ns" help:"Namespace, e.g. account."`
	Key            string `arg:"" help:"Key within the namespace."`
	Value          string `arg:"" name:"json" help:"The value as JSON, e.g. '{\"account_id\": \"3f0c9f8e\"}'; - reads standard input."`
	IdempotencyKey string `placeholder:"K" help:"Makes a repeated write return the first result (safe retries)."`
}

// Run writes the record; it prints its version and the event it appended.
func (c *PutCmd) Run(ctx context.Context, env *Env) error {
	value, err := jsonArg("JSON", c.Value, env.Stdin)
	if err != nil {
		return err
	}
	r, err := client.PutValue(ctx, env.Client, c.Namespace, c.Key, value, ptr(c.IdempotencyKey))
	if err != nil {
		return err
	}
	v := r.Ledger.PutValue
	if v == nil {
		return orNoAnswer(nil, "putValue")
	}
	return env.emit(v, func(w io.Writer) error {
		ev := ""
		if v.Event != nil {
			ev = fmt.Sprintf(": event %s at position %s", v.Event.EventType, v.Event.Position)
		}
		_, err := fmt.Fprintf(w, "%s/%s version %d%s\n", v.Namespace, v.Key, v.Version, ev)
		return err
	})
}

// AppendCmd is `append TYPE JSON`: appendEvent (L2, L3).
type AppendCmd struct {
	Type           string `arg:"" help:"Event type, e.g. payment.requested."`
	Data           string `arg:"" name:"json" help:"The event's data as JSON; - reads standard input."`
	IdempotencyKey string `placeholder:"K" help:"Makes a repeated append return the first result (safe retries)."`
}

// Run appends the event; it prints its id and position.
func (c *AppendCmd) Run(ctx context.Context, env *Env) error {
	data, err := jsonArg("JSON", c.Data, env.Stdin)
	if err != nil {
		return err
	}
	r, err := client.AppendEvent(ctx, env.Client, c.Type, data, ptr(c.IdempotencyKey))
	if err != nil {
		return err
	}
	e := r.Ledger.AppendEvent
	if e == nil {
		return orNoAnswer(nil, "appendEvent")
	}
	return env.emit(e, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "event %s %s at position %s\n", e.Id, e.EventType, e.Position)
		return err
	})
}
