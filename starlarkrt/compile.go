package starlarkrt

import (
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/actionsledger/actionsledger/internal/fault"
)

// Check compiles src (syntax and resolution, no execution) and checks that
// it defines, with def, a function named entry taking exactly one
// parameter. It also refuses load statements, a function that calls
// itself (recursion is off) and sources over DefaultMaxSource bytes.
// Errors: *fault.Error with code fault.InvalidAction and an empty Field,
// whose message starts with file:line:col where there is a position (or
// with the file name); a plain error if the compiler panics (a bug).
func Check(filename, src, entry string) error {
	if len(src) > DefaultMaxSource {
		return fault.New(fault.InvalidAction, "", "%s: source is %d bytes; the limit is %d", filename, len(src), DefaultMaxSource)
	}
	p, err := compile(filename, src)
	if err == nil {
		err = p.checkEntry(entry)
	}
	var cp *compilePanic
	switch {
	case errors.As(err, &cp):
		return err // not the script's fault: reported as internal
	case err != nil:
		return &fault.Error{Code: fault.InvalidAction, Message: err.Error(), Err: err}
	}
	return nil
}

// program is a compiled script, shared by every call of the same source.
type program struct {
	filename string
	prog     *starlark.Program // immutable; safe for concurrent Init
	defs     map[string]defInfo
}

// defInfo describes a top-level def statement.
type defInfo struct {
	pos    syntax.Position
	params int  // number of parameters
	plain  bool // no *args or **kwargs
}

// compileError is an error at a position of the source (or of the file as
// a whole when pos is invalid).
type compileError struct {
	pos  syntax.Position
	file string
	msg  string
}

func (e *compileError) Error() string {
	if e.pos.IsValid() {
		return e.pos.String() + ": " + e.msg
	}
	return e.file + ": " + e.msg
}

// compilePanic is a panic recovered while compiling: a bug, not a
// problem of the script.
type compilePanic struct {
	value any
	stack string
}

func (e *compilePanic) Error() string { return fmt.Sprintf("panic while compiling: %v", e.value) }

func compileScriptError(err error) *ScriptError {
	se := &ScriptError{Kind: KindError, Message: err.Error(), Err: err}
	var (
		ce *compileError
		cp *compilePanic
	)
	if errors.As(err, &cp) {
		se.Kind, se.GoStack = KindPanic, cp.stack
	}
	if errors.As(err, &ce) {
		se.Message = ce.msg
		if ce.pos.IsValid() {
			se.Position = ce.pos.String()
		}
	}
	return se
}

func (p *program) checkEntry(entry string) error {
	d, ok := p.defs[entry]
	if !ok {
		return &compileError{file: p.filename, msg: fmt.Sprintf("no function named %q is defined (define it with def %s(event): ...)", entry, entry)}
	}
	if d.params != 1 || !d.plain {
		return &compileError{pos: d.pos, msg: fmt.Sprintf("function %s must take exactly one parameter (the event); it takes %d", entry, d.params)}
	}
	return nil
}

// compile returns the program for src, from the cache when the same
// source was compiled before.
//
// Caching pays: compiling a small handler (parse, rewrite, resolve,
// compile) costs about three times as much as running it (BenchmarkCall
// against BenchmarkCallUncached), and a handler's source is fixed per
// action version, so the cache turns compile-per-call into compile-once.
func compile(filename, src string) (p *program, err error) {
	return compileIn(fileDialect, filename, src)
}

// dialect is a flavour of Starlark: the file options and the predeclared
// names the resolver accepts. Programs are cached per dialect.
type dialect struct {
	name          string
	opts          *syntax.FileOptions
	isPredeclared func(string) bool
}

// fileDialect is the dialect of actions' scripts (the package doc).
var fileDialect = &dialect{name: "file", opts: fileOptions, isPredeclared: isPredeclared}

// compileIn is compile for a dialect.
func compileIn(d *dialect, filename, src string) (p *program, err error) {
	key := cacheKey{dialect: d.name, filename: filename, sum: sha256.Sum256([]byte(src))}
	if p := programs.get(key); p != nil {
		return p, nil
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, &compilePanic{value: r, stack: string(debug.Stack())}
		}
	}()
	p, err = compileSourceIn(d, filename, src)
	if err != nil {
		return nil, err
	}
	programs.put(key, p)
	return p, nil
}

// fileOptions are the default dialect: no while, no top-level control
// flow, no global reassignment, no sets, and recursion detected and
// refused at run time.
var fileOptions = &syntax.FileOptions{}

func compileSource(filename, src string) (*program, error) {
	return compileSourceIn(fileDialect, filename, src)
}

func compileSourceIn(d *dialect, filename, src string) (*program, error) {
	f, err := d.opts.Parse(filename, src, 0)
	if err != nil {
		var se syntax.Error
		if errors.As(err, &se) {
			return nil, &compileError{pos: se.Pos, msg: se.Msg}
		}
		return nil, &compileError{file: filename, msg: err.Error()}
	}
	for _, stmt := range f.Stmts {
		if ld, ok := stmt.(*syntax.LoadStmt); ok {
			return nil, &compileError{pos: ld.Load, msg: "load statements are not supported"}
		}
	}
	if err := rewriteFile(f); err != nil {
		return nil, err
	}
	prog, err := starlark.FileProgram(f, d.isPredeclared)
	if err != nil {
		var el resolve.ErrorList
		if errors.As(err, &el) && len(el) > 0 {
			msgs := make([]string, 0, len(el))
			for i, e := range el {
				if i == 5 {
					msgs = append(msgs, fmt.Sprintf("and %d more", len(el)-5))
					break
				}
				if i == 0 {
					msgs = append(msgs, e.Msg)
				} else {
					msgs = append(msgs, e.Error())
				}
			}
			return nil, &compileError{pos: el[0].Pos, msg: strings.Join(msgs, "; ")}
		}
		return nil, &compileError{file: filename, msg: err.Error()}
	}
	p := &program{filename: filename, prog: prog, defs: map[string]defInfo{}}
	for _, stmt := range f.Stmts {
		def, ok := stmt.(*syntax.DefStmt)
		if !ok {
			continue
		}
		d := defInfo{pos: def.Def, params: len(def.Params), plain: true}
		for _, param := range def.Params {
			if _, ok := param.(*syntax.UnaryExpr); ok {
				d.plain = false
			}
		}
		p.defs[def.Name.Name] = d
		if pos, ok := selfReference(def); ok {
			return nil, &compileError{pos: pos, msg: fmt.Sprintf("function %s refers to itself; recursion is not allowed", def.Name.Name)}
		}
	}
	return p, nil
}

// selfReference reports the first use of a top-level function's own name
// inside its body: direct recursion, which would fail at run time anyway.
// (Mutual recursion is refused at run time only.)
func selfReference(def *syntax.DefStmt) (syntax.Position, bool) {
	self, _ := def.Name.Binding.(*resolve.Binding)
	if self == nil {
		return syntax.Position{}, false
	}
	var found syntax.Position
	for _, stmt := range def.Body {
		syntax.Walk(stmt, func(n syntax.Node) bool {
			if found.IsValid() {
				return false
			}
			if id, ok := n.(*syntax.Ident); ok && id.Binding == any(self) {
				found = id.NamePos
			}
			return true
		})
	}
	return found, found.IsValid()
}

// programs caches compiled programs by file name and source hash.
var programs = newProgramCache(128)

type cacheKey struct {
	dialect  string
	filename string
	sum      [sha256.Size]byte
}

// programCache is a small LRU cache. Programs hold no values, so sharing
// one between concurrent calls is safe.
type programCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheEntry, most recent first
	index map[cacheKey]*list.Element
}

type cacheEntry struct {
	key cacheKey
	p   *program
}

func newProgramCache(max int) *programCache {
	return &programCache{max: max, order: list.New(), index: map[cacheKey]*list.Element{}}
}

func (c *programCache) get(key cacheKey) *program {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cacheEntry).p
	}
	return nil
}

func (c *programCache) put(key cacheKey, p *program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.index[key]; ok {
		return
	}
	c.index[key] = c.order.PushFront(&cacheEntry{key: key, p: p})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.index, last.Value.(*cacheEntry).key)
	}
}
