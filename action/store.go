package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/clock"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
)

// Action is an action's current summary.
type Action struct {
	ID             uuid.UUID
	CurrentVersion int
	Status         string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Version is one stored version of an action's definition.
type Version struct {
	ActionID     uuid.UUID
	Version      int
	Definition   Definition
	FromPosition int64
	CreatedAt    time.Time
}

// Store keeps action versions and a cache of their compiled form.
type Store struct {
	pool  *pgxpool.Pool
	clock clock.Clock
	kinds KindChecker

	mu       sync.Mutex
	compiled map[versionKey]*Compiled
}

type versionKey struct {
	id      uuid.UUID
	version int
}

// NewStore returns a Store. kinds validates handler kinds and configs.
func NewStore(pool *pgxpool.Pool, c clock.Clock, kinds KindChecker) *Store {
	return &Store{pool: pool, clock: c, kinds: kinds, compiled: map[versionKey]*Compiled{}}
}

// Create validates def (A3) and stores it as version 1 of action id (A1).
// Calling it again with an equal definition returns the stored version;
// a different one fails. Errors: the validation errors of Compile (joined),
// fault.ActionExists.
func (s *Store) Create(ctx context.Context, id uuid.UUID, def Definition) (Version, error) {
	if def.Triggers == nil {
		def.Triggers = []Trigger{}
	}
	comp, err := Compile(def, s.kinds)
	if err != nil {
		return Version{}, err
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return Version{}, fmt.Errorf("action: encode definition: %w", err)
	}
	var out Version
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.clock.Now()
		// Lock the dispatcher's cursor row: no dispatch batch runs while the
		// action appears, so every event after from_position meets its triggers.
		if _, err := tx.Exec(ctx, `UPDATE dispatch_state SET actions_epoch = actions_epoch + 1`); err != nil {
			return err
		}
		from, err := ledger.Head(ctx, tx)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO actions (id, current_version, created_at, updated_at) VALUES ($1, 1, $2, $2)
			ON CONFLICT (id) DO NOTHING`, id, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errExists
		}
		if _, err := tx.Exec(ctx, `INSERT INTO action_versions (action_id, version, definition, from_position, created_at)
			VALUES ($1, 1, $2, $3, $4)`, id, raw, from, now); err != nil {
			return err
		}
		out = Version{ActionID: id, Version: 1, Definition: def, FromPosition: from, CreatedAt: now}
		return nil
	})
	if errors.Is(err, errExists) {
		existing, gerr := s.Version(ctx, id, 1)
		if gerr != nil {
			return Version{}, gerr
		}
		old, _ := json.Marshal(existing.Definition)
		if jsonvalue.Equal(old, raw) {
			return existing, nil
		}
		return Version{}, fault.New(fault.ActionExists, "id", "an action with this id already exists with a different definition")
	}
	if err != nil {
		return Version{}, fmt.Errorf("action: create: %w", err)
	}
	comp.ActionID, comp.Version, comp.FromPosition = id, 1, out.FromPosition
	s.mu.Lock()
	s.compiled[versionKey{id, 1}] = comp
	s.mu.Unlock()
	return out, nil
}

var errExists = errors.New("action exists")

// Get returns the action's summary, or nil when there is none.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (*Action, error) {
	var a Action
	err := s.pool.QueryRow(ctx, `SELECT id, current_version, status, created_at, updated_at FROM actions WHERE id = $1`, id).
		Scan(&a.ID, &a.CurrentVersion, &a.Status, &a.CreatedAt, &a.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("action: get: %w", err)
	}
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return &a, nil
}

// List pages actions by id after the given one (uuid.Nil for the start).
func (s *Store) List(ctx context.Context, after uuid.UUID, first int) ([]Action, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, current_version, status, created_at, updated_at FROM actions
		WHERE id > $1 ORDER BY id LIMIT $2`, after, first)
	if err != nil {
		return nil, fmt.Errorf("action: list: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Action, error) {
		var a Action
		err := r.Scan(&a.ID, &a.CurrentVersion, &a.Status, &a.CreatedAt, &a.UpdatedAt)
		a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
		return a, err
	})
}

// Version returns one version. Errors: fault.NotFound.
func (s *Store) Version(ctx context.Context, id uuid.UUID, version int) (Version, error) {
	vs, err := s.versions(ctx, `WHERE action_id = $1 AND version = $2`, id, version)
	if err != nil {
		return Version{}, err
	}
	if len(vs) == 0 {
		return Version{}, fault.New(fault.NotFound, "id", "no such action version")
	}
	return vs[0], nil
}

// Versions returns every version of an action, oldest first.
func (s *Store) Versions(ctx context.Context, id uuid.UUID) ([]Version, error) {
	return s.versions(ctx, `WHERE action_id = $1 ORDER BY version`, id)
}

func (s *Store) versions(ctx context.Context, where string, args ...any) ([]Version, error) {
	rows, err := s.pool.Query(ctx, `SELECT action_id, version, definition, from_position, created_at FROM action_versions `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("action: versions: %w", err)
	}
	return pgx.CollectRows(rows, scanVersion)
}

func scanVersion(r pgx.CollectableRow) (Version, error) {
	var v Version
	var raw []byte
	if err := r.Scan(&v.ActionID, &v.Version, &raw, &v.FromPosition, &v.CreatedAt); err != nil {
		return v, err
	}
	v.CreatedAt = v.CreatedAt.UTC()
	if err := json.Unmarshal(raw, &v.Definition); err != nil {
		return v, fmt.Errorf("action: decode definition: %w", err)
	}
	return v, nil
}

// Compiled returns the compiled form of an action version, compiling and
// caching it on first use. Errors: fault.NotFound.
func (s *Store) Compiled(ctx context.Context, id uuid.UUID, version int) (*Compiled, error) {
	k := versionKey{id, version}
	s.mu.Lock()
	c := s.compiled[k]
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	v, err := s.Version(ctx, id, version)
	if err != nil {
		return nil, err
	}
	return s.compile(v)
}

func (s *Store) compile(v Version) (*Compiled, error) {
	k := versionKey{v.ActionID, v.Version}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.compiled[k]; c != nil {
		return c, nil
	}
	// Stored definitions were valid when stored; the kind check is skipped so a
	// kind removed later does not hide the version.
	c, err := Compile(v.Definition, nil)
	if err != nil {
		return nil, fmt.Errorf("action %s version %d no longer compiles: %w", v.ActionID, v.Version, err)
	}
	c.ActionID, c.Version, c.FromPosition = v.ActionID, v.Version, v.FromPosition
	s.compiled[k] = c
	return c, nil
}

// Active returns the compiled current version of every ACTIVE action, and
// the actions epoch they were read at. q is the dispatcher's transaction.
func (s *Store) Active(ctx context.Context, q ledger.Querier) ([]*Compiled, error) {
	rows, err := q.Query(ctx, `SELECT v.action_id, v.version, v.definition, v.from_position, v.created_at
		FROM actions a JOIN action_versions v ON v.action_id = a.id AND v.version = a.current_version
		WHERE a.status = 'ACTIVE' ORDER BY a.id`)
	if err != nil {
		return nil, fmt.Errorf("action: active: %w", err)
	}
	vs, err := pgx.CollectRows(rows, scanVersion)
	if err != nil {
		return nil, err
	}
	out := make([]*Compiled, 0, len(vs))
	for _, v := range vs {
		c, err := s.compile(v)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
