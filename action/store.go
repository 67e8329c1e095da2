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

	"github.com/actionsledger/actionsledger/auth"
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

// Action statuses (A2). Only an ACTIVE action's triggers match new events
// and only an ACTIVE tool can be called; sessions already open keep running
// their turns whatever the status.
const (
	StatusActive   = "ACTIVE"
	StatusDisabled = "DISABLED"
	StatusArchived = "ARCHIVED"
)

// Version is one stored version of an action's definition.
type Version struct {
	ActionID     uuid.UUID
	Version      int
	Definition   Definition
	FromPosition int64
	CreatedAt    time.Time
	// Author is the principal who stored the version; "" when unknown
	// (stored before authors were recorded, or without a principal).
	Author string
}

// Kinds is what the store needs of the handler kinds a server offers (a
// turns.Registry).
type Kinds interface {
	// Check validates a kind with its config and source (see KindChecker).
	Check(kind string, config jsonvalue.Value, source *string, tool bool) error
	// ToolRefs lists the tool actions a kind's config refers to (see
	// ToolRefsFunc).
	ToolRefs(kind string, config jsonvalue.Value) []uuid.UUID
	// Redact hides a config's secrets for reading (turns.Registry.Redact).
	Redact(kind string, config jsonvalue.Value) jsonvalue.Value
	// KeepSecrets carries secrets an update leaves redacted over from the
	// previous config (turns.Registry.KeepSecrets).
	KeepSecrets(kind string, config, previous jsonvalue.Value) jsonvalue.Value
}

// RedactConfig returns a definition's config as queries show it: the
// kind's secrets replaced (issue 10 item 9: secrets are write-only).
func (s *Store) RedactConfig(kind string, config jsonvalue.Value) jsonvalue.Value {
	if s.kinds == nil {
		return config
	}
	return s.kinds.Redact(kind, config)
}

// Store keeps action versions and a cache of their compiled form.
type Store struct {
	// BudgetCheck, when set, refuses a definition with a spend cap
	// (session.maxPerSessionUsd, G8) whose handler calls no model the
	// server can price; its error is the reason.
	BudgetCheck func(kind string, config jsonvalue.Value) error

	pool  *pgxpool.Pool
	clock clock.Clock
	kinds Kinds

	mu       sync.Mutex
	compiled map[versionKey]*Compiled
}

type versionKey struct {
	id      uuid.UUID
	version int
}

// NewStore returns a Store. kinds validates handler kinds and configs; nil
// skips that check (and counts no tool references in grants).
func NewStore(pool *pgxpool.Pool, c clock.Clock, kinds Kinds) *Store {
	return &Store{pool: pool, clock: c, kinds: kinds, compiled: map[versionKey]*Compiled{}}
}

// Create validates def (A3) and stores it as version 1 of action id (A1),
// authored by the principal on ctx, who must hold every grant the version
// declares or implies (issue 11). Calling it again with an equal definition
// returns the stored version; a different one fails. Errors: fault.Forbidden
// (naming the grant, e.g. permissions.read[0]; nothing else is checked
// then), the validation errors of Compile (joined), fault.ActionExists.
func (s *Store) Create(ctx context.Context, id uuid.UUID, def Definition) (Version, error) {
	return s.CreateFrom(ctx, id, def, From{})
}

// CreateFrom is Create with a backfill (issue 15): with from.Position set,
// version 1's triggers also judge the events from that position up to the
// ledger head, in batches the dispatcher works through (Backfill); a
// repeated call that returns the stored version starts nothing. Errors:
// those of Create, and fault.BadInput (field from) for a position under 1
// or after the head + 1.
func (s *Store) CreateFrom(ctx context.Context, id uuid.UUID, def Definition, from From) (Version, error) {
	author, def, comp, raw, err := s.prepare(ctx, def)
	if err != nil {
		return Version{}, err
	}
	var out Version
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.clock.Now()
		head, err := cut(ctx, tx)
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
		if _, err := tx.Exec(ctx, `INSERT INTO action_versions (action_id, version, definition, from_position, created_at, author)
			VALUES ($1, 1, $2, $3, $4, $5)`, id, raw, head, now, nullable(author)); err != nil {
			return err
		}
		out = Version{ActionID: id, Version: 1, Definition: def, FromPosition: head, CreatedAt: now, Author: author}
		if err := startBackfill(ctx, tx, id, 1, from.Position, head, now); err != nil {
			return err
		}
		return syncClocks(ctx, tx, id, comp, now, true)
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
	s.remember(comp, out)
	return out, nil
}

var errExists = errors.New("action exists")

// Proposed validates and compiles def as Create would (A3), with the
// principal on ctx as its author, without storing it: a dry run's
// definition (issue 15). Errors: those of Create's checks.
func (s *Store) Proposed(ctx context.Context, def Definition) (*Compiled, error) {
	author, def, comp, _, err := s.prepare(ctx, def)
	if err != nil {
		return nil, err
	}
	comp.Def, comp.Author = def, author
	return comp, nil
}

// prepare checks that the principal on ctx may store def (issue 11),
// validates and compiles def (A3) and encodes it for storage. It returns
// the author to record: the principal's id ("" without one).
func (s *Store) prepare(ctx context.Context, def Definition) (string, Definition, *Compiled, []byte, error) {
	if def.Triggers == nil {
		def.Triggers = []Trigger{}
	}
	p, hasPrincipal := auth.From(ctx)
	var check StoreCheckFunc
	if hasPrincipal {
		check = func(needs []auth.Need) []error { return auth.CheckStore(p, needs) }
	}
	var kinds KindChecker
	if s.kinds != nil {
		kinds = s.kinds.Check
	}
	comp, err := compile(def, kinds, s.toolRefs(), check, true, s.clock.Now())
	if err != nil {
		if hasPrincipal && s.kinds != nil {
			err = obscureTools(err, s.kinds.ToolRefs(def.Kind, def.Config), func(id uuid.UUID) bool {
				return p.Allows(auth.Read, auth.ActionResource(id))
			})
		}
		return "", def, nil, nil, err
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return "", def, nil, nil, fmt.Errorf("action: encode definition: %w", err)
	}
	if comp.Session != nil && comp.Session.MaxUSD != nil && s.BudgetCheck != nil {
		if err := s.BudgetCheck(def.Kind, def.Config); err != nil {
			return "", def, nil, nil, fault.New(fault.InvalidAction, "session.maxPerSessionUsd", "%v: remove maxPerSessionUsd, or use an agent whose model has a price", err)
		}
	}
	comp.Author = p.ID
	return p.ID, def, comp, raw, nil
}

// obscureTools rewrites the refusals of a kind's tool references
// (config.tools[i].action) that would tell a principal who may not read
// the tool action whether it exists, is a tool or is active (issue 11: a
// CALL-only holder learns nothing more): for such a reference the three
// read the same. refs are the references by index (ToolRefsFunc).
func obscureTools(err error, refs []uuid.UUID, readable func(uuid.UUID) bool) error {
	errs := Errors(err)
	changed := false
	for i, e := range errs {
		fe := fault.As(e)
		if fe == nil {
			continue
		}
		var n int
		if _, serr := fmt.Sscanf(fe.Field, "config.tools[%d].action", &n); serr != nil || fe.Field != fmt.Sprintf("config.tools[%d].action", n) ||
			n < 0 || n >= len(refs) || readable(refs[n]) {
			continue
		}
		switch fault.CodeOf(fe.Err) {
		case fault.NotFound, fault.NotATool, fault.ActionInactive:
			errs[i] = fault.New(fe.Code, fe.Field, "the tool action %s cannot be used: it is unknown, not a tool or not ACTIVE (you may not read it to learn which)", refs[n])
			changed = true
		}
	}
	if !changed {
		return err
	}
	return joinErrors(errs)
}

// toolRefs is the kinds' ToolRefs, or nil without kinds.
func (s *Store) toolRefs() ToolRefsFunc {
	if s.kinds == nil {
		return nil
	}
	return s.kinds.ToolRefs
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// cut locks the dispatcher's cursor row and bumps the actions epoch (so
// every dispatcher reloads its triggers), and returns the ledger head. No
// dispatch batch runs until tx ends, so the head is a clean cut: a change
// made in tx applies exactly to the events after it.
func cut(ctx context.Context, tx pgx.Tx) (int64, error) {
	if _, err := tx.Exec(ctx, `UPDATE dispatch_state SET actions_epoch = actions_epoch + 1`); err != nil {
		return 0, err
	}
	return ledger.Head(ctx, tx)
}

// remember caches a freshly stored version's compiled form.
func (s *Store) remember(comp *Compiled, v Version) {
	comp.ActionID, comp.Version, comp.FromPosition = v.ActionID, v.Version, v.FromPosition
	s.mu.Lock()
	s.compiled[versionKey{v.ActionID, v.Version}] = comp
	s.mu.Unlock()
}

// errUnchanged rolls back an update that would change nothing.
var errUnchanged = errors.New("action unchanged")

// Update validates def exactly as Create does (A3) and stores it as the
// action's next version (A2). The version's triggers match events after the
// ledger head at the update; the replaced version's triggers keep matching
// the events up to it, so an event is judged by the version current when it
// committed. Sessions keep the version they started with. The principal on
// ctx becomes the version's author and must hold its grants, as for Create.
// A config secret sent as turns.Redacted keeps the current version's. An
// update equal to the current definition, by its author, returns the
// current version and writes nothing. Errors: fault.Forbidden, the
// validation errors of Compile (joined), fault.NotFound.
func (s *Store) Update(ctx context.Context, id uuid.UUID, def Definition) (Version, error) {
	return s.UpdateFrom(ctx, id, def, From{})
}

// UpdateFrom is Update with a backfill (issue 15): with from.Position set,
// the new version's triggers also judge the events from that position up
// to the update (as CreateFrom); the versions before it keep what they
// judged. An update that makes no new version starts nothing. Errors:
// those of Update, and fault.BadInput (field from).
func (s *Store) UpdateFrom(ctx context.Context, id uuid.UUID, def Definition, from From) (Version, error) {
	if s.kinds != nil && len(def.Config) > 0 {
		// A definition read back and sent again carries its secrets
		// redacted: they stand for the current version's.
		if a, err := s.Get(ctx, id); err == nil && a != nil {
			if cur, err := s.Version(ctx, id, a.CurrentVersion); err == nil && cur.Definition.Kind == def.Kind {
				def.Config = s.kinds.KeepSecrets(def.Kind, def.Config, cur.Definition.Config)
			}
		}
	}
	author, def, comp, raw, err := s.prepare(ctx, def)
	if err != nil {
		return Version{}, err
	}
	var out Version
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.clock.Now()
		// A clean cut between the two versions (see cut). The action's
		// schedule clocks are locked first (lockClocks), then the cursor
		// row, then the action row, in the same order as SetStatus takes
		// them (Create's action has no clocks yet).
		if err := lockClocks(ctx, tx, id); err != nil {
			return err
		}
		head, err := cut(ctx, tx)
		if err != nil {
			return err
		}
		var current int
		var old []byte
		var oldAuthor, status string
		err = tx.QueryRow(ctx, `SELECT a.current_version, v.definition, coalesce(v.author, ''), a.status FROM actions a
			JOIN action_versions v ON v.action_id = a.id AND v.version = a.current_version
			WHERE a.id = $1 FOR UPDATE OF a`, id).Scan(&current, &old, &oldAuthor, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.New(fault.NotFound, "id", "no action with this id")
		}
		if err != nil {
			return err
		}
		if jsonvalue.Equal(old, raw) && oldAuthor == author {
			out.Version = current
			return errUnchanged
		}
		next := current + 1
		if _, err := tx.Exec(ctx, `INSERT INTO action_versions (action_id, version, definition, from_position, created_at, author)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, next, raw, head, now, nullable(author)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE actions SET current_version = $2, updated_at = $3 WHERE id = $1`, id, next, now); err != nil {
			return err
		}
		out = Version{ActionID: id, Version: next, Definition: def, FromPosition: head, CreatedAt: now, Author: author}
		if err := startBackfill(ctx, tx, id, next, from.Position, head, now); err != nil {
			return err
		}
		return syncClocks(ctx, tx, id, comp, now, status == StatusActive)
	})
	if errors.Is(err, errUnchanged) {
		return s.Version(ctx, id, out.Version)
	}
	if fault.As(err) != nil {
		return Version{}, err
	}
	if err != nil {
		return Version{}, fmt.Errorf("action: update: %w", err)
	}
	s.remember(comp, out)
	return out, nil
}

// SetStatus makes the action ACTIVE, DISABLED or ARCHIVED (A2) and returns
// it. The change takes effect at the ledger head, as a new version does: a
// disabled or archived action's triggers match no event committed after the
// change, and a re-enabled action's triggers match events committed after
// it. Setting the status the action already has changes nothing.
// Re-enabling (to ACTIVE from DISABLED or ARCHIVED) makes the current
// version run again with its grants, so the principal on ctx must hold
// them, as if it stored the version (issue 11). Errors: fault.BadInput
// (unknown status), fault.Forbidden (field status), fault.NotFound.
func (s *Store) SetStatus(ctx context.Context, id uuid.UUID, status string) (*Action, error) {
	switch status {
	case StatusActive, StatusDisabled, StatusArchived:
	default:
		return nil, fault.New(fault.BadInput, "status", "status is ACTIVE, DISABLED or ARCHIVED")
	}
	p, hasPrincipal := auth.From(ctx)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockClocks(ctx, tx, id); err != nil { // before the cut: see lockClocks
			return err
		}
		head, err := cut(ctx, tx)
		if err != nil {
			return err
		}
		if hasPrincipal && status == StatusActive {
			if err := s.mayEnable(ctx, tx, p, id); err != nil {
				return err
			}
		}
		now := s.clock.Now()
		tag, err := tx.Exec(ctx, `UPDATE actions SET status = $2, status_position = $3, updated_at = $4
			WHERE id = $1 AND status <> $2`, id, status, head, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errUnchanged // unknown id, or the status it already has
		}
		// A4: schedule triggers stop with the action and resume from now.
		return pauseClocks(ctx, tx, id, now, status == StatusActive)
	})
	if fault.As(err) != nil {
		return nil, err
	}
	if err != nil && !errors.Is(err, errUnchanged) {
		return nil, fmt.Errorf("action: set status: %w", err)
	}
	a, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fault.New(fault.NotFound, "id", "no action with this id")
	}
	return a, nil
}

// mayEnable refuses (fault.Forbidden, field status) re-enabling action id
// by p unless p holds every grant its current version declares or
// implies. The refusal names the first grant p lacks when p may read the
// action, nothing otherwise. It locks the action row in tx.
func (s *Store) mayEnable(ctx context.Context, tx pgx.Tx, p auth.Principal, id uuid.UUID) error {
	var status string
	var current int
	err := tx.QueryRow(ctx, `SELECT status, current_version FROM actions WHERE id = $1 FOR UPDATE`, id).Scan(&status, &current)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && status == StatusActive) {
		return nil // unknown, or active already: nothing changes
	}
	if err != nil {
		return err
	}
	comp, err := s.Compiled(ctx, id, current)
	if err != nil {
		return err
	}
	_, needs := grants(comp.Def, comp.Triggers, s.toolRefs())
	for _, n := range needs {
		if p.Allows(n.Action, n.Resource) {
			continue
		}
		if !p.Allows(auth.Read, auth.ActionResource(id)) {
			return fault.New(fault.Forbidden, "status",
				"not allowed: re-enabling runs the current version with its grants, which you must hold as if you stored it")
		}
		return fault.New(fault.Forbidden, "status",
			"not allowed: re-enabling runs version %d with its grants, which you must hold as if you stored it: you may not %s (it needs %s on %s; %s)",
			current, n.What, n.Action, n.Resource, n.Field)
	}
	return nil
}

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

// GetMany returns the summaries of the actions with the given ids, keyed
// by id; missing ids are absent (a dataloader's batch, issue 12).
func (s *Store) GetMany(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*Action, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, current_version, status, created_at, updated_at FROM actions WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("action: get: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Action, error) { return scanAction(r) })
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]*Action, len(list))
	for _, a := range list {
		out[a.ID] = a
	}
	return out, nil
}

// VersionKey names one version of an action.
type VersionKey struct {
	ActionID uuid.UUID
	Version  int
}

// VersionsByKey returns the versions named by keys, keyed the same way;
// missing ones are absent (a dataloader's batch, issue 12).
func (s *Store) VersionsByKey(ctx context.Context, keys []VersionKey) (map[VersionKey]*Version, error) {
	out := make(map[VersionKey]*Version, len(keys))
	b := &pgx.Batch{}
	QueueVersions(b, keys, out)
	return out, s.pool.SendBatch(ctx, b).Close()
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

// Current returns the current versions of the ACTIVE actions whose
// definition has a tool block (tools: true) or an mcp block (served: true),
// ordered by action id: what the MCP endpoint lists (issue 17). One query.
func (s *Store) Current(ctx context.Context, tools, served bool) ([]Version, error) {
	return s.versions(ctx, `WHERE (action_id, version) IN (SELECT id, current_version FROM actions WHERE status = 'ACTIVE')
		AND (($1 AND jsonb_typeof(definition->'tool') = 'object') OR ($2 AND jsonb_typeof(definition->'mcp') = 'object'))
		ORDER BY action_id`, tools, served)
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
	rows, err := s.pool.Query(ctx, `SELECT action_id, version, definition, from_position, created_at, coalesce(author, '') FROM action_versions `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("action: versions: %w", err)
	}
	return pgx.CollectRows(rows, scanVersion)
}

func scanVersion(r pgx.CollectableRow) (Version, error) {
	var v Version
	var raw []byte
	if err := r.Scan(&v.ActionID, &v.Version, &raw, &v.FromPosition, &v.CreatedAt, &v.Author); err != nil {
		return v, err
	}
	return decodeVersion(v, raw)
}

// decodeVersion completes a version scanned with its definition's JSON raw.
func decodeVersion(v Version, raw []byte) (Version, error) {
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

// CachedCompiled returns the compiled versions cached so far (Compiled
// caches on first use; entries are never dropped), in no particular
// order, when there are more than have (otherwise nil, false): a caller
// that keeps what it built from them rebuilds it only when the cache grew.
// The turn executor reads the pending inputs of sessions at these versions
// in its claim's first round trip (issue 14).
func (s *Store) CachedCompiled(have int) ([]*Compiled, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.compiled) <= have {
		return nil, false
	}
	out := make([]*Compiled, 0, len(s.compiled))
	for _, c := range s.compiled {
		out = append(out, c)
	}
	return out, true
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
	c, err := compile(v.Definition, nil, s.toolRefs(), nil, false, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("action %s version %d no longer compiles: %w", v.ActionID, v.Version, err)
	}
	c.ActionID, c.Version, c.FromPosition, c.Author = v.ActionID, v.Version, v.FromPosition, v.Author
	s.compiled[k] = c
	return c, nil
}

// Active returns what the dispatcher matches events against (A2), as copies
// of compiled versions whose positions bound the events they apply to:
//
//   - A version covers the events after its from_position up to the next
//     version's (FromPosition, ToPosition; Compiled.Covers). Its start
//     triggers create sessions, at this version, and its triggers leave the
//     intake records (S5). A disabled or archived action covers nothing after
//     its status_position, and a re-enabled one nothing up to it.
//   - A session keeps the version it started with, so a version's triggers
//     also apply, for the open sessions pinned to it, to every later event
//     while the action stays ACTIVE (FromPosition, PinnedToPosition;
//     Compiled.CoversPinned), whatever newer versions exist.
//
// Every version that covers an event after the dispatch cursor is returned.
// A version that covers none is returned only while it has OPEN or WAITING
// sessions and the action is ACTIVE (or its status changed after the
// cursor); it contributes nothing to new sessions (Covers is false). Such a
// version never gains sessions: only the dispatcher starts trigger sessions,
// under the cursor row lock q holds, and only for the covering version; so
// an index built from Active stays right until the actions epoch changes (a
// version that loses its last session only costs a few non-matches until
// then). Sessions written at a superseded version by other means need an
// epoch bump to be seen. q is the dispatcher's transaction, holding the
// cursor row.
func (s *Store) Active(ctx context.Context, q ledger.Querier) ([]*Compiled, error) {
	rows, err := q.Query(ctx, `SELECT action_id, version, definition, from_position, created_at, coalesce(author, ''), lo,
			coalesce(hi, 0), coalesce(pinned_hi, 0), NOT covers FROM (
			SELECT r.*, (hi IS NULL OR (hi > lo AND hi > cursor)) AS covers,
			       (pinned_hi IS NULL OR (pinned_hi > lo AND pinned_hi > cursor)) AS pinned_live
			FROM (
				SELECT v.action_id, v.version, v.definition, v.from_position, v.created_at, v.author, d.position AS cursor,
				       greatest(v.from_position, CASE WHEN a.status = 'ACTIVE' THEN a.status_position ELSE 0 END) AS lo,
				       least(lead(v.from_position) OVER (PARTITION BY v.action_id ORDER BY v.version),
				             CASE WHEN a.status <> 'ACTIVE' THEN a.status_position END) AS hi,
				       CASE WHEN a.status <> 'ACTIVE' THEN a.status_position END AS pinned_hi
				FROM actions a JOIN action_versions v ON v.action_id = a.id CROSS JOIN dispatch_state d
				-- a version whose backfill still judges events joins live
				-- dispatch when it is done (issue 15)
				WHERE NOT EXISTS (SELECT 1 FROM action_backfills b
					WHERE b.action_id = v.action_id AND b.version = v.version AND b.joined_position IS NULL)) r) r
		WHERE CASE WHEN covers THEN true
			WHEN pinned_live THEN EXISTS (SELECT 1 FROM sessions s WHERE s.action_id = r.action_id
				AND s.version = r.version AND s.status IN ('OPEN', 'WAITING'))
			ELSE false END
		ORDER BY action_id, version`)
	if err != nil {
		return nil, fmt.Errorf("action: active: %w", err)
	}
	type span struct {
		v                Version
		lo, hi, pinnedHi int64
		pinnedOnly       bool
	}
	spans, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (span, error) {
		var sp span
		var raw []byte
		if err := r.Scan(&sp.v.ActionID, &sp.v.Version, &raw, &sp.v.FromPosition, &sp.v.CreatedAt, &sp.v.Author,
			&sp.lo, &sp.hi, &sp.pinnedHi, &sp.pinnedOnly); err != nil {
			return sp, err
		}
		return sp, json.Unmarshal(raw, &sp.v.Definition)
	})
	if err != nil {
		return nil, fmt.Errorf("action: active: %w", err)
	}
	out := make([]*Compiled, 0, len(spans))
	for _, sp := range spans {
		c, err := s.compile(sp.v)
		if err != nil {
			return nil, err
		}
		cp := *c
		cp.FromPosition, cp.ToPosition, cp.PinnedToPosition, cp.pinnedOnly = sp.lo, sp.hi, sp.pinnedHi, sp.pinnedOnly
		out = append(out, &cp)
	}
	return out, nil
}
