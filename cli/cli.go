package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/kong"

	"github.com/actionsledger/actionsledger/client"
)

// Exit codes of the command line; see the package documentation.
const (
	ExitOK          = 0
	ExitUsage       = 1
	ExitRefused     = 2
	ExitUnreachable = 3
	ExitNotFound    = 4
	ExitInterrupted = 130
)

// Group keys of the help text: which commands talk to a server and which to
// the database.
const (
	GroupClient   = "client"
	GroupDatabase = "database"
)

// Groups are the help text's command groups; pass them to kong with
// kong.ExplicitGroups.
var Groups = []kong.Group{
	{Key: GroupClient, Title: "Client commands: GraphQL clients of a running server (--server, --token; -o json for scripts)"},
	{Key: GroupDatabase, Title: "Server and database commands: run the service or write to its database directly (DATABASE_URL)"},
}

// Globals are the client commands' flags, given before or after the command.
type Globals struct {
	Server string `env:"ACTIONSLEDGER_SERVER" default:"${default_server}" placeholder:"URL" help:"The server's base URL (or its /graphql endpoint)."`
	Token  string `env:"ACTIONSLEDGER_TOKEN" placeholder:"TOKEN" help:"Bearer token for a server with AUTH=on."`
	Output string `short:"o" enum:"table,json" default:"table" placeholder:"table|json" help:"Output: human tables, or JSON for scripts (one document; one per line for streams)."`
}

// Commands are the client commands (issue 12, CLI). Embed it in the kong
// grammar with `embed:""`, next to Globals.
type Commands struct {
	Apply    ApplyCmd    `cmd:"" group:"client" help:"Create an action from a YAML or JSON file, or update it when its definition changed."`
	Actions  ActionsCmd  `cmd:"" group:"client" help:"List actions, or show one (definition, versions, status)."`
	Sessions SessionsCmd `cmd:"" group:"client" help:"An action's sessions: list, show, watch, start, message, resume, close, retry, archive, spend caps."`
	// Issue 15.
	Executions ExecutionsCmd `cmd:"" group:"client" help:"List the executions of an action without a session block, retry a failed one, or replay any execution (nothing committed)."`
	Inbox      InboxCmd      `cmd:"" group:"client" help:"List the approvals and held turns waiting for an answer."`
	Respond    RespondCmd    `cmd:"" group:"client" help:"Answer an approval (--approve|--deny) or a held turn (--retry|--skip)."`
	Events     EventsCmd     `cmd:"" group:"client" help:"Follow the ledger's events."`
	Put        PutCmd        `cmd:"" group:"client" help:"Write a key-value record to the ledger."`
	Append     AppendCmd     `cmd:"" group:"client" help:"Append an event with no record to the ledger."`
	Tokens     TokensCmd     `cmd:"" group:"client" help:"Create, list or revoke bearer tokens through the server (needs ADMIN)."`
	MCP        MCPCmd        `cmd:"" name:"mcp" group:"client" help:"Serve MCP on stdin/stdout for a desktop client, bridged to the server's /mcp with --token."`
}

// Vars are the kong variables the grammar's tags refer to.
var Vars = kong.Vars{"default_server": client.DefaultServer}

// IO is where a command reads and writes.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Env is what a client command's Run gets: the client of the server, the
// output format and the streams.
type Env struct {
	Client *client.Client
	JSON   bool
	IO
}

// exitPanic carries kong's exit (after --help) out of Parse.
type exitPanic int

// Execute parses args against grammar (a pointer to a struct that embeds
// Globals, g being that embedded value, and Commands), runs the chosen
// command's Run and returns the exit code. It prints errors to io.Stderr:
// the code and message of each GraphQL error, or with -o json one object
// {"error": {"exit": N, "code": ..., "message": ..., "errors": [...]}}.
// binds are handed to kong (Bind, BindTo, BindToProvider) for commands that
// need more than an *Env and a context; options go to kong.New.
func Execute(ctx context.Context, grammar any, g *Globals, args []string, stdio IO, options ...kong.Option) (code int) {
	opts := append([]kong.Option{
		kong.Name("actionsledger"),
		kong.Writers(stdio.Stdout, stdio.Stderr),
		kong.Exit(func(code int) { panic(exitPanic(code)) }),
		kong.ExplicitGroups(Groups),
		Vars,
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.BindToProvider(func() (*Env, error) {
			c, err := client.New(g.Server, client.Options{Token: g.Token})
			if err != nil {
				return nil, usageError{err}
			}
			return &Env{Client: c, JSON: g.Output == "json", IO: stdio}, nil
		}),
	}, options...)
	defer func() {
		if v := recover(); v != nil {
			e, ok := v.(exitPanic)
			if !ok {
				panic(v)
			}
			code = int(e)
		}
	}()
	parser, err := kong.New(grammar, opts...)
	if err != nil {
		fmt.Fprintln(stdio.Stderr, "actionsledger:", err)
		return ExitUsage
	}
	// Text that is not UTF-8 would be replaced by U+FFFD when the request
	// is encoded, and so written changed (HARD-PARTS 7): refuse it here, as
	// the server refuses it in a request.
	for i, a := range args {
		if !utf8.ValidString(a) {
			fmt.Fprintf(stdio.Stderr, "actionsledger: argument %d (%s) is not valid UTF-8 text\n", i+1, strings.ToValidUTF8(a, "\uFFFD"))
			return ExitUsage
		}
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "actionsledger: %v (see --help)\n", err)
		return ExitUsage
	}
	err = kctx.Run()
	if err == nil {
		return ExitOK
	}
	code = ExitCode(err)
	if ctx.Err() != nil && code == ExitUnreachable {
		code = ExitInterrupted
	}
	report(stdio.Stderr, g.Output == "json", code, err)
	return code
}

// ExitCode returns the exit code for err: 0 for nil, ExitNotFound for a
// not-found answer (a null object or the code NOT_FOUND), ExitRefused for
// other GraphQL errors and for the MCP endpoint's refusals (mcp), ExitUnreachable for a *client.TransportError and
// ExitUsage for the rest (usage, input and local errors).
func ExitCode(err error) int {
	var (
		re *client.ResponseError
		te *client.TransportError
		nf notFoundError
		rf *refusedError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &nf):
		return ExitNotFound
	case errors.As(err, &rf):
		return ExitRefused
	case errors.As(err, &re):
		if re.Code() == "NOT_FOUND" {
			return ExitNotFound
		}
		return ExitRefused
	case errors.As(err, &te):
		return ExitUnreachable
	}
	return ExitUsage
}

// report prints err for a person, or as one JSON object.
func report(w io.Writer, asJSON bool, code int, err error) {
	var re *client.ResponseError
	isRE := errors.As(err, &re)
	if asJSON {
		out := map[string]any{"exit": code, "message": err.Error()}
		if isRE {
			out["code"] = re.Code()
			out["errors"] = re.Errors
		} else if code == ExitNotFound {
			out["code"] = "NOT_FOUND"
		}
		_ = writeJSON(w, map[string]any{"error": out}, false)
		return
	}
	if isRE {
		for _, e := range re.Errors {
			fmt.Fprintln(w, "actionsledger:", e.String())
		}
		return
	}
	msg := err.Error()
	if code == ExitNotFound {
		msg = "NOT_FOUND: " + msg
	}
	fmt.Fprintln(w, "actionsledger:", msg)
}

// usageError is a mistake in the command line or its input (ExitUsage).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// notFoundError: the server answered null for what the command names
// (ExitNotFound).
type notFoundError struct{ what string }

func (e notFoundError) Error() string { return "no " + e.what }

func notFound(format string, args ...any) error {
	return notFoundError{fmt.Sprintf(format, args...)}
}

// emit prints v as one indented JSON document with -o json, or calls human.
func (e *Env) emit(v any, human func(w io.Writer) error) error {
	if e.JSON {
		return writeJSON(e.Stdout, v, true)
	}
	return human(e.Stdout)
}

// writeJSON writes v as JSON and a newline; indent for documents, not for
// JSON lines. HTML characters are not escaped.
func writeJSON(w io.Writer, v any, indent bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// upper returns s in upper case with surrounding space removed, for enum
// arguments given in either case.
func upper(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }
