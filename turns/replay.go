package turns

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/wI2L/jsondiff"

	"github.com/actionsledger/actionsledger/action"
	"github.com/actionsledger/actionsledger/internal/fault"
	"github.com/actionsledger/actionsledger/jsonvalue"
	"github.com/actionsledger/actionsledger/ledger"
	"github.com/actionsledger/actionsledger/session"
)

// Replay providers: where an agent's model replies come from in a replay.
const (
	// ReplayLive calls the model for real, as the original did.
	ReplayLive = "LIVE"
	// ReplayRecorded answers each model call with the reply the original
	// run recorded in its transcript, in order (handlers that take
	// RecordedReplies from the context; others run as with ReplayLive).
	ReplayRecorded = "RECORDED"
)

// ReplayRecord is what a replay keeps beside its execution (T9): the
// outcome of the replay and of the original, each {status, output, error,
// state, session_status, reason} (the last three for turns), and their
// structural difference as JSON Patch operations (RFC 6902) from the
// original to the replay, each with the original's value.
type ReplayRecord struct {
	Outcome  map[string]any `json:"outcome"`
	Original map[string]any `json:"original"`
	Diff     []Change       `json:"diff"`
	By       string         `json:"by,omitempty"`
	Provider string         `json:"provider"`
	// Of is the execution replayed (ReplayOf; not stored in the record).
	Of uuid.UUID `json:"-"`
}

// Record returns the replay record of a replay execution; nil for any
// other execution.
func (x *Execution) Record() (*ReplayRecord, error) {
	if x.ReplayOf == nil || len(x.Replay) == 0 {
		return nil, nil
	}
	var r ReplayRecord
	if err := json.Unmarshal(x.Replay, &r); err != nil {
		return nil, fmt.Errorf("turns: replay %s: %w", x.ID, err)
	}
	r.Of = *x.ReplayOf
	if r.Diff == nil {
		r.Diff = []Change{}
	}
	return &r, nil
}

// Change is one difference between an original outcome and its replay:
// Op is add, remove or replace at Path (a JSON Pointer into the outcome);
// Original is the original's value there (nil for add), Replay the
// replay's (nil for remove).
type Change struct {
	Op       string `json:"op"`
	Path     string `json:"path"`
	Original any    `json:"original"`
	Replay   any    `json:"replay"`
}

// MaxReplays is how many replays one process runs at once; more are
// refused with fault.Unavailable (retry later).
const MaxReplays = 4

// replaySlots bounds the replays running in this process.
var replaySlots = make(chan struct{}, MaxReplays)

// recordedKey carries a replay's recorded model replies.
type recordedKey struct{}

// WithRecordedReplies returns ctx carrying replies for RecordedReplies (a
// replay with ReplayRecorded sets it; tests of handlers too).
func WithRecordedReplies(ctx context.Context, replies []jsonvalue.Value) context.Context {
	return context.WithValue(ctx, recordedKey{}, replies)
}

// RecordedReplies returns the model replies a replay with ReplayRecorded
// gives the handler, oldest first, each the data of a model_message
// transcript entry of the original run; ok false outside such a replay.
func RecordedReplies(ctx context.Context) (replies []jsonvalue.Value, ok bool) {
	r, ok := ctx.Value(recordedKey{}).([]jsonvalue.Value)
	return r, ok
}

// Replay runs the handler of execution id of action actionID again on
// exactly what it received (T9): for a turn, the inputs it took (firings
// and answers included), the state the session had, its final flag, its
// end and the continuation it resumed from, at the version the session
// was pinned to; for an execution of an action without a session block,
// its event. Nothing commits: the handler's ledger writes and tool calls
// run in a transaction that is rolled back (what a handler does outside
// the ledger, such as an http call or a model call, happens for real,
// except model calls under ReplayRecorded). The run is one attempt with
// no handler credential. It is stored as an execution with ReplayOf set,
// the original's session and turn, its own status, output and transcript,
// and a ReplayRecord; replaying a replay replays its original. by is the
// principal asking.
//
// Errors: fault.NotFound (field id) for an execution that is not this
// action's, fault.BadInput (field id) for a tool call (replay its turn)
// or an execution that has not finished, fault.BadInput (field provider),
// fault.Unavailable when MaxReplays run already.
func (e *Executor) Replay(ctx context.Context, actionID, id uuid.UUID, provider, by string) (*Execution, error) {
	select {
	case replaySlots <- struct{}{}:
		defer func() { <-replaySlots }()
	default:
		return nil, fault.New(fault.Unavailable, "", "%d replays are running on this server: try again when one has finished", MaxReplays)
	}
	if provider == "" {
		provider = ReplayLive
	}
	if provider != ReplayLive && provider != ReplayRecorded {
		return nil, fault.New(fault.BadInput, "provider", "provider is LIVE or RECORDED")
	}
	store := NewStore(e.pool)
	orig, err := store.Execution(ctx, id)
	if err != nil {
		return nil, err
	}
	if orig != nil && orig.ReplayOf != nil {
		if orig, err = store.Execution(ctx, *orig.ReplayOf); err != nil {
			return nil, err
		}
	}
	switch {
	case orig == nil || orig.ActionID != actionID:
		return nil, fault.New(fault.NotFound, "id", "this action has no execution with this id")
	case orig.ParentID != nil:
		return nil, fault.New(fault.BadInput, "id", "a tool call is replayed with the turn that made it: replay its parent execution")
	case orig.Status == ExecQueued || orig.Status == ExecRunning:
		return nil, fault.New(fault.BadInput, "id", "the execution has not finished (%s): replay it once it has", orig.Status)
	case orig.SID == nil && orig.EventID == nil:
		return nil, fault.New(fault.BadInput, "id", "only turns and executions of actions without a session block can be replayed")
	}
	comp, err := e.actions.Compiled(ctx, orig.ActionID, orig.Version)
	if err != nil {
		return nil, err
	}
	replayID := uuid.New()
	req, sess, original, err := e.replayRequest(ctx, orig, replayID)
	if err != nil {
		return nil, err
	}
	req.Spec = Spec{Config: comp.Def.Config, Source: comp.Def.Source}
	req.Transcript = &Transcript{now: e.clock.Now, attempt: 1}
	if provider == ReplayRecorded {
		replies, err := recordedReplies(ctx, e.pool, orig.ID)
		if err != nil {
			return nil, err
		}
		ctx = WithRecordedReplies(ctx, replies)
	}
	started := e.clock.Now()

	// The run: one attempt, in a transaction that is rolled back, begun
	// only when the handler first reaches the ledger or a tool (no
	// connection is held while it waits on anything else). The replay's
	// row is written in it first, so the tool calls it makes (child
	// executions) can name it.
	w := ledger.NewWriter(e.pool, e.clock.Now)
	w.OnBegin = func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO executions (id, action_id, version, sid, turn, status, attempts, started_at, replay_of)
			VALUES ($1, $2, $3, $4, $5, 'RUNNING', 1, $6, $7)`, replayID, orig.ActionID, orig.Version, orig.SID, orig.Turn, started, orig.ID)
		return err
	}
	defer w.Rollback(context.WithoutCancel(ctx))
	var out *Outcome
	var runErr error
	h, herr := e.kinds.Handler(comp.Def.Kind, req.Spec)
	if herr != nil {
		runErr = herr
	} else {
		if e.EnvFunc != nil {
			run := Run{ExecutionID: replayID, Action: comp}
			if sess != nil {
				run.SID, run.SessionID = sess.SID, sess.ID
			}
			req.Env = e.EnvFunc(w, run)
		}
		out, runErr = e.attempt(ctx, h, req)
		if runErr == nil {
			var verr error
			if sess != nil {
				verr = out.validate(req.Final, req.EndsAt != nil)
			} else {
				verr = out.validateSessionless()
			}
			if verr != nil {
				runErr = Permanent(fmt.Errorf("%s: %w", FailOutputInvalid, verr))
			}
		}
	}
	w.Rollback(context.WithoutCancel(ctx))

	status, outcome := replayOutcome(out, runErr, sess != nil, req.State)
	rec := ReplayRecord{Outcome: outcome, Original: original, By: by, Provider: provider}
	if rec.Diff, err = diffOutcomes(original, outcome); err != nil {
		return nil, err
	}
	recJSON, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var output []byte
	if out != nil && runErr == nil {
		output = out.Output
	}
	var errText *string
	if runErr != nil {
		s := storable(runErr.Error())
		errText = &s
	}
	entries := req.Transcript.Entries()
	var wr turnWrites
	wr.transcript(replayID, entries)
	ctx = context.WithoutCancel(ctx) // the run happened: keep its record
	err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO executions (id, action_id, version, sid, turn, status, attempts, output, error,
				started_at, finished_at, triggers, replay_of, replay)
			VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $10, $11, $12, $13)`,
			replayID, orig.ActionID, orig.Version, orig.SID, orig.Turn, status, jsonText(jsonvalue.Value(output)), errText,
			started, e.clock.Now(), orig.Triggers, orig.ID, recJSON); err != nil {
			return err
		}
		b := &pgx.Batch{}
		wr.queue(b, e.clock.Now())
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("turns: replay: %w", err)
	}
	return store.Execution(ctx, replayID)
}

// replayRequest rebuilds what execution orig's handler received, with
// replayID as the execution id, and the original's outcome.
func (e *Executor) replayRequest(ctx context.Context, orig *Execution, replayID uuid.UUID) (*Request, *session.Session, map[string]any, error) {
	if orig.SID == nil {
		evs, err := ledger.EventsByID(ctx, e.pool, []uuid.UUID{*orig.EventID})
		if err != nil {
			return nil, nil, nil, err
		}
		ev, ok := evs[*orig.EventID]
		if !ok {
			return nil, nil, nil, fmt.Errorf("turns: replay: event %s is missing", *orig.EventID)
		}
		req := &Request{ActionID: orig.ActionID, Version: orig.Version, ExecutionID: replayID, Attempt: 1,
			Inputs: []InputView{{Identity: "event/" + ev.ID.String(), Kind: session.KindEvent, Sequence: 1, Triggers: orig.Triggers,
				Event: &EventView{ID: ev.ID, Type: ev.Type, Data: ev.Data, CommitTime: ev.CommitTime, Position: ev.Position}}}}
		return req, nil, execOutcome(orig), nil
	}
	sess, err := session.BySID(ctx, e.pool, *orig.SID)
	if err != nil {
		return nil, nil, nil, err
	}
	var t struct {
		final    bool
		endsAt   *time.Time
		resume   jsonvalue.Value
		retryOf  int
		cpState  jsonvalue.Value
		cpStatus *string
		cpReason *string
		prior    jsonvalue.Value
		hasPrior bool
	}
	err = e.pool.QueryRow(ctx, `SELECT t.final, t.ends_at, t.resume, coalesce(t.retry_of, 0), t.checkpoint_state, t.checkpoint_status, t.checkpoint_reason,
			p.checkpoint_state, p.number IS NOT NULL
		FROM session_turns t
		LEFT JOIN LATERAL (SELECT number, checkpoint_state FROM session_turns p
			WHERE p.sid = t.sid AND p.number < t.number AND p.checkpoint_status IS NOT NULL ORDER BY p.number DESC LIMIT 1) p ON true
		WHERE t.sid = $1 AND t.number = $2`, *orig.SID, *orig.Turn).
		Scan(&t.final, &t.endsAt, &t.resume, &t.retryOf, &t.cpState, &t.cpStatus, &t.cpReason, &t.prior, &t.hasPrior)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("turns: replay: turn %d: %w", *orig.Turn, err)
	}
	rows, err := e.pool.Query(ctx, `SELECT `+session.InputColumns+` FROM session_inputs i
		WHERE (i.sid, i.seq) IN (SELECT sid, seq FROM turn_inputs WHERE sid = $1 AND turn = $2) ORDER BY i.order_key, i.seq`, *orig.SID, *orig.Turn)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("turns: replay: inputs: %w", err)
	}
	ins, err := pgx.CollectRows(rows, session.ScanInput)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("turns: replay: inputs: %w", err)
	}
	views, err := e.views(ctx, ins, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	replayed, err := e.replayedInputs(ctx, sess.SID, t.retryOf)
	if err != nil {
		return nil, nil, nil, err
	}
	// The state the turn began with: the session's after the last turn
	// before it that left a checkpoint; the initial state before any.
	state := jsonvalue.Value(nil)
	if t.hasPrior {
		state = t.prior
	}
	req := &Request{
		ActionID: sess.ActionID, Version: sess.Version, SessionID: sess.ID, Input: sess.Input, State: state,
		Inputs: views, Turn: *orig.Turn, Final: t.final, EndsAt: utcPtr(t.endsAt), ExecutionID: replayID, Attempt: 1,
		Resume: t.resume, Replayed: replayed,
	}
	original := execOutcome(orig)
	original["state"] = jsonAny(t.cpState)
	original["session_status"] = derefOrNil(t.cpStatus)
	if orig.Status == ExecSucceeded {
		original["reason"] = derefOrNil(t.cpReason)
	}
	return req, sess, original, nil
}

// recordedReplies reads the model replies execution id recorded
// (model_message transcript entries), oldest first.
func recordedReplies(ctx context.Context, q ledger.Querier, id uuid.UUID) ([]jsonvalue.Value, error) {
	rows, err := q.Query(ctx, `SELECT data FROM transcript_entries WHERE execution_id = $1 AND kind = 'model_message' ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("turns: replay: recorded replies: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[jsonvalue.Value])
	if err != nil {
		return nil, fmt.Errorf("turns: replay: recorded replies: %w", err)
	}
	return out, nil
}

// execOutcome is an original execution's outcome: status, output, error.
func execOutcome(x *Execution) map[string]any {
	return map[string]any{"status": string(x.Status), "output": jsonAny(x.Output), "error": derefOrNil(x.Error)}
}

// replayOutcome is a replay's outcome in the shape of the original's, and
// its execution status.
func replayOutcome(out *Outcome, runErr error, turn bool, state jsonvalue.Value) (ExecStatus, map[string]any) {
	o := map[string]any{"status": string(ExecSucceeded), "output": nil, "error": nil}
	status := ExecSucceeded
	switch h := AsHold(runErr); {
	case runErr == nil:
		o["output"] = jsonAny(out.Output)
		if turn {
			o["state"], o["session_status"], o["reason"] = jsonAny(out.State), out.Status, nil
			if out.Reason != "" {
				o["reason"] = out.Reason
			} else if out.Status == string(session.Waiting) {
				o["reason"] = waitingReason(len(out.Approvals))
			}
		}
		return status, o
	case h != nil && turn:
		code := h.Code()
		status = ExecHeld
		o["error"] = storable(string(code) + ": " + h.Message)
		o["state"], o["session_status"] = jsonAny(state), string(session.Waiting)
	default:
		status = ExecFailed
		o["error"] = storable(runErr.Error())
		if turn {
			o["state"], o["session_status"] = jsonAny(state), string(session.Failed)
		}
	}
	o["status"] = string(status)
	return status, o
}

// diffOutcomes is the structural difference from original to replay.
func diffOutcomes(original, replay map[string]any) ([]Change, error) {
	patch, err := jsondiff.Compare(original, replay)
	if err != nil {
		return nil, fmt.Errorf("turns: replay: diff: %w", err)
	}
	out := make([]Change, 0, len(patch))
	for _, op := range patch {
		c := Change{Op: op.Type, Path: op.Path, Original: op.OldValue, Replay: op.Value}
		if op.Type == jsondiff.OperationRemove {
			c.Replay = nil
		}
		out = append(out, c)
	}
	return out, nil
}

// jsonAny decodes a stored JSON value for the outcome documents; nil for
// none.
func jsonAny(v jsonvalue.Value) any {
	if len(v) == 0 {
		return nil
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return string(v)
	}
	return x
}

func derefOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// DryRunTurns runs the first turn of each of the sessions sids of a dry
// run (issue 15; session.Dispatcher.DryRun), which exist only in the dry
// run's transaction tx: the handler of comp, one attempt, on the session's
// pending inputs in delivery order (up to maxInputs), with the session's
// initial state. Its ledger writes and tool calls run in a transaction of
// their own that is rolled back; what it does outside the ledger is real
// (an http request, a model call).
func (e *Executor) DryRunTurns(ctx context.Context, tx pgx.Tx, comp *action.Compiled, sids []int64) ([]session.DryRunTurn, error) {
	out := make([]session.DryRunTurn, 0, len(sids))
	for _, sid := range sids {
		sess, err := session.BySID(ctx, tx, sid)
		if err != nil || sess == nil {
			return nil, err
		}
		limit := session.MaxDryRunTurnInputs
		if comp.Session != nil && comp.Session.MaxInputs > 0 {
			limit = min(limit, comp.Session.MaxInputs)
		}
		rows, err := tx.Query(ctx, `SELECT `+session.InputColumns+` FROM session_inputs WHERE sid = $1 ORDER BY order_key, seq LIMIT $2`, sid, limit)
		if err != nil {
			return nil, fmt.Errorf("turns: dry run: %w", err)
		}
		ins, err := pgx.CollectRows(rows, session.ScanInput)
		if err != nil {
			return nil, fmt.Errorf("turns: dry run: %w", err)
		}
		views, err := e.views(ctx, ins, nil)
		if err != nil {
			return nil, err
		}
		execID := ledger.NewID()
		req := &Request{ActionID: comp.ActionID, Version: comp.Version, SessionID: sess.ID, Input: sess.Input, State: sess.State,
			Inputs: views, Turn: 1, EndsAt: sess.EndsAt, ExecutionID: execID, Attempt: 1,
			Spec: Spec{Config: comp.Def.Config, Source: comp.Def.Source}, Transcript: &Transcript{now: e.clock.Now, attempt: 1}}
		var o *Outcome
		var runErr error
		h, herr := e.kinds.Handler(comp.Def.Kind, req.Spec)
		if herr != nil {
			runErr = herr
		} else {
			w := ledger.NewWriter(e.pool, e.clock.Now)
			if e.EnvFunc != nil {
				req.Env = e.EnvFunc(w, Run{ExecutionID: execID, Action: comp, SID: sid, SessionID: sess.ID})
			}
			o, runErr = e.attempt(ctx, h, req)
			if runErr == nil {
				if verr := o.validate(false, sess.EndsAt != nil); verr != nil {
					runErr = Permanent(fmt.Errorf("%s: %w", FailOutputInvalid, verr))
				}
			}
			w.Rollback(context.WithoutCancel(ctx))
		}
		status, outcome := replayOutcome(o, runErr, true, sess.State)
		t := session.DryRunTurn{SessionID: sess.ID, Inputs: len(ins), Status: string(status)}
		if runErr == nil {
			t.Output, t.State = o.Output, o.State
			st := o.Status
			t.SessionStatus = &st
		} else {
			msg, _ := outcome["error"].(string)
			t.Error = &msg
		}
		out = append(out, t)
	}
	return out, nil
}
