// Package migrations holds the database schema as embedded, numbered SQL files
// and applies them with goose. Applying is idempotent: files already applied
// are skipped, and a Postgres session lock keeps concurrent starters from
// racing.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var files embed.FS

// Apply brings the database at dsn up to the newest schema version.
// Running it again is harmless.
func Apply(ctx context.Context, dsn string) error {
	// Parse as a pool URL so pool settings (pool_max_conns, ...) in the URL
	// are understood rather than sent to the server as parameters.
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("migrations: locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: provider: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Checker tells whether a database's schema is the one this binary embeds
// (issue 12, /readyz). It reads through a pool and takes no lock.
type Checker struct {
	db *sql.DB
	p  *goose.Provider
}

// NewChecker returns a Checker over pool; Close releases it (not the pool).
func NewChecker(pool *pgxpool.Pool) (*Checker, error) {
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, files)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrations: provider: %w", err)
	}
	return &Checker{db: db, p: p}, nil
}

// Versions returns the newest schema version applied to the database and
// the newest this binary embeds; current < latest means migrations are
// pending, current > latest that a newer binary migrated the database.
func (c *Checker) Versions(ctx context.Context) (current, latest int64, err error) {
	current, latest, err = c.p.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migrations: versions: %w", err)
	}
	return current, latest, nil
}

// Close releases the Checker's database handle.
func (c *Checker) Close() error { return c.db.Close() }

// Fingerprint returns the hex SHA-256 over the embedded migration files
// (names and contents, in name order). It changes whenever the schema does,
// so tests can key a prepared template database on it.
func Fingerprint() string {
	h := sha256.New()
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a build bug.
		panic(fmt.Sprintf("migrations: fingerprint: %v", err))
	}
	return hex.EncodeToString(h.Sum(nil))
}
