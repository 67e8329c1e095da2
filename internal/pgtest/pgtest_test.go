package pgtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", redact(dsn), err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	conn := connect(t, AdminURL())
	var n int
	err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n)
	if err != nil {
		t.Fatalf("query pg_database: %v", err)
	}
	return n == 1
}

// TestNewDB: two calls give two distinct, migrated databases that hold no
// data of each other, and both are gone once the subtest has ended.
func TestNewDB(t *testing.T) {
	var names []string
	t.Run("two databases", func(t *testing.T) {
		dsnA, dsnB := NewDB(t), NewDB(t)
		if dsnA == dsnB {
			t.Fatalf("NewDB returned the same DSN twice: %s", dsnA)
		}
		ctx := context.Background()
		a, b := connect(t, dsnA), connect(t, dsnB)
		for _, c := range []*pgx.Conn{a, b} {
			var name string
			var hasHead bool
			err := c.QueryRow(ctx,
				"SELECT current_database(), to_regclass('public.ledger_head') IS NOT NULL").
				Scan(&name, &hasHead)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, DBPrefix) {
				t.Errorf("database %q lacks prefix %q", name, DBPrefix)
			}
			if !hasHead {
				t.Errorf("database %s has no table ledger_head: not migrated", name)
			}
			var events int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&events); err != nil {
				t.Fatal(err)
			}
			if events != 0 {
				t.Errorf("database %s: %d events, want an empty ledger", name, events)
			}
			names = append(names, name)
		}
		if names[0] == names[1] {
			t.Fatalf("both DSNs lead to database %s", names[0])
		}

		// A write to one is not seen in the other.
		if _, err := a.Exec(ctx, "UPDATE ledger_head SET position = 42"); err != nil {
			t.Fatal(err)
		}
		var pos int64
		if err := b.QueryRow(ctx, "SELECT position FROM ledger_head").Scan(&pos); err != nil {
			t.Fatal(err)
		}
		if pos != 0 {
			t.Errorf("second database sees position %d written to the first", pos)
		}
		for _, n := range names {
			if !databaseExists(t, n) {
				t.Errorf("database %s missing while the test runs", n)
			}
		}
	})
	if len(names) != 2 {
		t.Fatalf("subtest recorded %d databases", len(names))
	}
	for _, n := range names {
		if databaseExists(t, n) {
			t.Errorf("database %s still exists after its test ended", n)
		}
	}
}

// TestNewPoolParallel: many pools at once, each on its own database.
func TestNewPoolParallel(t *testing.T) {
	var (
		mu    sync.Mutex
		names = map[string]bool{}
	)
	t.Run("group", func(t *testing.T) {
		for i := range 6 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				pool := NewPool(t)
				var name string
				if err := pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if names[name] {
					t.Errorf("database %s handed out twice", name)
				}
				names[name] = true
			})
		}
	})
	if len(names) != 6 {
		t.Fatalf("got %d distinct databases, want 6", len(names))
	}
	for n := range names {
		if databaseExists(t, n) {
			t.Errorf("database %s still exists after its test ended", n)
		}
	}
}

// fatalTB records a Fatal instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// TestUnreachableFails: no server means a failure that says what to do,
// never a silent skip.
func TestUnreachableFails(t *testing.T) {
	t.Setenv("TEST_DATABASE_URL", "postgres://postgres:secret@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5")
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewDB(f)
		f.msg = "NewDB returned"
	}()
	<-done
	if !strings.Contains(f.msg, "make test") {
		t.Errorf("NewDB on an unreachable server: got %q, want a Fatal mentioning `make test`", f.msg)
	}
	if strings.Contains(f.msg, "secret") {
		t.Errorf("message leaks the password: %q", f.msg)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@h:5432/postgres?sslmode=disable", "postgres://u@h:5432/x?sslmode=disable"},
		{"postgresql://u:p@h/", "postgresql://u:p@h/x"},
		{"postgres://h", "postgres://h/x"},
		{"host=h dbname=postgres", "host=h dbname=postgres dbname=x"},
	} {
		got, err := withDatabase(tc.in, "x")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil || cfg.Database != "x" {
			t.Errorf("pgx.ParseConfig(%q): database %q, %v; want x", got, cfg.Database, err)
		}
	}
}

// errRecorder is a testing.TB whose Errorf only records (the check under
// test is to fail the test it is given).
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A test database holding a row whose parent is missing fails its test
// when it ends (issue 14: the references kept without foreign keys).
func TestCheckReferencesReportsOrphans(t *testing.T) {
	t.Parallel()
	dsn := NewDB(t)
	conn := connect(t, dsn)
	rec := &errRecorder{TB: t}
	checkReferences(t.Context(), rec, dsn)
	if len(rec.errs) != 0 {
		t.Fatalf("a fresh database reported %v", rec.errs)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO turn_inputs (sid, turn, seq) VALUES (1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	checkReferences(t.Context(), rec, dsn)
	joined := strings.Join(rec.errs, "\n")
	if !strings.Contains(joined, "turn_inputs.turn") || !strings.Contains(joined, "turn_inputs.seq") {
		t.Fatalf("want both turn_inputs references reported, got %q", joined)
	}
	// The orphan goes, so the cleanup's own check passes.
	if _, err := conn.Exec(t.Context(), `DELETE FROM turn_inputs`); err != nil {
		t.Fatal(err)
	}
}
