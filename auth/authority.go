package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Principals the server makes itself.
const (
	// DevID is the principal of dev mode (no AUTH); createToken refuses it.
	// As the author of an action version it holds everything while the
	// server runs without AUTH, and nothing under AUTH=on.
	DevID = "dev"
	// AdminID is the principal of ADMIN_TOKEN (and the default of `token
	// create --admin`): as an author it holds ADMIN on `*` while the server
	// is configured with an ADMIN_TOKEN, else the policies stored for it.
	// A version it stores is still bounded by its grants, which the storing
	// token's own policies had to cover.
	AdminID = "admin"
)

// AllNamespaces, in Grants.Read or Grants.Write, stands for every ledger
// namespace; storing it needs the policy on `ledger` itself.
const AllNamespaces = "*"

// EventNamespace returns the ledger namespace an event of type eventType
// belongs to: the text before its first dot, or the whole type when it has
// none ("entry.inserted" -> "entry", "audit" -> "audit").
func EventNamespace(eventType string) string {
	ns, _, _ := strings.Cut(eventType, ".")
	return ns
}

// Grants is what an action version declares it reaches when it runs,
// beyond its own sessions (issue 11): the ledger namespaces its triggers,
// handler and tool code read (events and records) and write, the tool
// actions it calls, and the actions whose sessions session() reads. The
// action package adds what the definition implies (the namespaces its
// triggers pin, an agent's tool references) to what it declares.
type Grants struct {
	Read     []string    `json:"read"`
	Write    []string    `json:"write"`
	Tools    []uuid.UUID `json:"tools"`
	Sessions []uuid.UUID `json:"sessions"`
}

// Normalize returns g with every list sorted and without duplicates, and
// never nil (so it reads and compares the same however it was built).
func (g Grants) Normalize() Grants {
	norm := func(s []string) []string {
		out := slices.Clone(s)
		slices.Sort(out)
		out = slices.Compact(out)
		if out == nil {
			out = []string{}
		}
		return out
	}
	ids := func(s []uuid.UUID) []uuid.UUID {
		out := slices.Clone(s)
		slices.SortFunc(out, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		out = slices.Compact(out)
		if out == nil {
			out = []uuid.UUID{}
		}
		return out
	}
	return Grants{Read: norm(g.Read), Write: norm(g.Write), Tools: ids(g.Tools), Sessions: ids(g.Sessions)}
}

// Union returns the grants of g and h together, normalized.
func (g Grants) Union(h Grants) Grants {
	return Grants{
		Read:     append(slices.Clone(g.Read), h.Read...),
		Write:    append(slices.Clone(g.Write), h.Write...),
		Tools:    append(slices.Clone(g.Tools), h.Tools...),
		Sessions: append(slices.Clone(g.Sessions), h.Sessions...),
	}.Normalize()
}

// LedgerResource is the policy resource a namespace grant needs: ledger
// for AllNamespaces, ledger:<ns> otherwise.
func LedgerResource(ns string) string {
	if ns == AllNamespaces {
		return LedgerPrefix
	}
	return NamespaceResource(ns)
}

// Need is one policy storing a version requires: Action on Resource,
// because of the definition's Field, described in What (in the
// definition's own words, so a refusal reveals nothing else).
type Need struct {
	Action, Resource string
	Field            string
	What             string
}

// Authority is what a running action version may do (issue 11): in
// enforcing mode, each grant of Grants that its author still holds; in dev
// mode (Unrestricted) every ledger namespace and every tool, as before
// authorisation existed. Session reach beyond the runner's own sessions
// always needs a grant in Sessions, in every mode (T10). A nil Authority
// allows nothing.
type Authority struct {
	// Unrestricted: dev mode; ledger and tool checks pass.
	Unrestricted bool
	// Grants are the version's declared and implied grants.
	Grants Grants
	// Author is the version's author with the policies they hold now.
	Author Principal
}

func hasNamespace(list []string, ns string) bool {
	return slices.Contains(list, AllNamespaces) || slices.Contains(list, ns)
}

// MayRead reports whether the version may read ledger namespace ns: its
// events (through triggers and inputs) and its records (ledger.get).
func (a *Authority) MayRead(ns string) bool {
	if a == nil {
		return false
	}
	return a.Unrestricted || (hasNamespace(a.Grants.Read, ns) && a.Author.Allows(Read, NamespaceResource(ns)))
}

// MayWrite reports whether the version may write records of namespace ns.
func (a *Authority) MayWrite(ns string) bool {
	if a == nil {
		return false
	}
	return a.Unrestricted || (hasNamespace(a.Grants.Write, ns) && a.Author.Allows(Write, NamespaceResource(ns)))
}

// MayCall reports whether the version may call tool action id.
func (a *Authority) MayCall(id uuid.UUID) bool {
	if a == nil {
		return false
	}
	return a.Unrestricted || (slices.Contains(a.Grants.Tools, id) && a.Author.Allows(Call, ActionResource(id)))
}

// MayReadSessions reports whether the version may read the sessions of
// action id through session(): only an action its definition names in
// Sessions, in every mode (T10 keeps a turn's handler to its own session
// otherwise).
func (a *Authority) MayReadSessions(id uuid.UUID) bool {
	if a == nil || !slices.Contains(a.Grants.Sessions, id) {
		return false
	}
	return a.Unrestricted || a.Author.Allows(Read, ActionResource(id))
}

// MayMessage reports whether the version's code may send messages to the
// sessions of action id (G1, sender AGENT): id is in its Sessions grant
// (as for reading them) and, outside dev mode, its author holds RESPOND
// on id now, as sending from the API needs.
func (a *Authority) MayMessage(id uuid.UUID) bool {
	if a == nil || !slices.Contains(a.Grants.Sessions, id) {
		return false
	}
	return a.Unrestricted || a.Author.Allows(Respond, ActionResource(id))
}

// CheckStore returns a FORBIDDEN fault, naming its field, for each need p
// does not hold. A principal may store a version only when it holds every
// grant the version declares or implies: nobody creates an action more
// powerful than themselves (issue 11).
func CheckStore(p Principal, needs []Need) []error {
	var out []error
	for _, n := range needs {
		if !p.Allows(n.Action, n.Resource) {
			out = append(out, fault.New(fault.Forbidden, n.Field,
				"you may not %s (it needs %s on %s), so an action you store may not either", n.What, n.Action, n.Resource))
		}
	}
	return out
}

// Authorities resolves the authority action versions run with. Under
// enforcement an author's policies are read from the database and cached
// until any principal's policies change (auth_state.epoch, bumped by
// CreateToken), so a shrunk grant applies from the next check on, in every
// process. Safe for concurrent use.
type Authorities struct {
	pool    *pgxpool.Pool
	enforce bool
	admin   bool

	mu    sync.Mutex
	epoch int64
	cache map[string]Principal
}

// NewAuthorities returns a resolver. enforce is AUTH=on; admin tells that
// the server has an ADMIN_TOKEN, whose principal AdminID then holds ADMIN on
// `*` as an author too. Without enforce every authority is Unrestricted.
func NewAuthorities(pool *pgxpool.Pool, enforce, admin bool) *Authorities {
	return &Authorities{pool: pool, enforce: enforce, admin: admin, epoch: -1, cache: map[string]Principal{}}
}

// Enforced reports whether authorities are checked (AUTH=on).
func (r *Authorities) Enforced() bool { return r != nil && r.enforce }

// Querier is what Authorities reads through: a pool, a connection or a
// transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Epoch returns the policy epoch: it changes whenever a principal's
// policies do.
func Epoch(ctx context.Context, q Querier) (int64, error) {
	var e int64
	if err := q.QueryRow(ctx, epochSQL).Scan(&e); err != nil {
		return 0, fmt.Errorf("auth: policy epoch: %w", err)
	}
	return e, nil
}

const epochSQL = `SELECT epoch FROM auth_state`

// QueueEpoch queues Epoch's read in b, into e.
func QueueEpoch(b *pgx.Batch, e *int64) {
	b.Queue(epochSQL).QueryRow(func(r pgx.Row) error {
		if err := r.Scan(e); err != nil {
			return fmt.Errorf("auth: policy epoch: %w", err)
		}
		return nil
	})
}

// For returns the authority of a version stored by author (empty for
// versions stored before authors were recorded, which count as DevID)
// declaring grants. It reads the policy epoch through q (nil: the pool) and
// the author's policies when they are not cached at that epoch.
func (r *Authorities) For(ctx context.Context, q Querier, author string, grants Grants) (*Authority, error) {
	if r == nil || !r.enforce {
		return &Authority{Unrestricted: true, Grants: grants}, nil
	}
	if q == nil {
		q = r.pool
	}
	epoch, err := Epoch(ctx, q)
	if err != nil {
		return nil, err
	}
	p, err := r.principal(ctx, q, author, epoch)
	if err != nil {
		return nil, err
	}
	return &Authority{Grants: grants, Author: p}, nil
}

func (r *Authorities) principal(ctx context.Context, q Querier, author string, epoch int64) (Principal, error) {
	if author == "" {
		author = DevID
	}
	r.mu.Lock()
	if r.epoch != epoch {
		r.epoch, r.cache = epoch, map[string]Principal{}
	}
	p, ok := r.cache[author]
	r.mu.Unlock()
	if ok {
		return p, nil
	}
	switch {
	case author == AdminID && r.admin:
		p = Principal{ID: AdminID, Policies: []Policy{{Action: Admin, Resource: All}}}
	case author == DevID:
		p = Principal{ID: author} // holds nothing under AUTH
	default:
		pols, err := policiesOf(ctx, q, author)
		if err != nil {
			return Principal{}, err
		}
		p = Principal{ID: author, Policies: pols}
	}
	r.mu.Lock()
	if r.epoch == epoch {
		r.cache[author] = p
	}
	r.mu.Unlock()
	return p, nil
}

func policiesOf(ctx context.Context, q Querier, id string) ([]Policy, error) {
	rows, err := q.Query(ctx, `SELECT action, resource FROM auth_policies WHERE principal_id = $1 ORDER BY resource, action`, id)
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Policy, error) {
		var p Policy
		err := r.Scan(&p.Action, &p.Resource)
		return p, err
	})
}
