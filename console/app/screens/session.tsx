// A session (issue 13): its status, version, input, state and end; what it
// waits on (answerable here); pending inputs; its clock's next firings; and
// its turns newest first, each with its inputs, checkpoint, output and
// transcript as a conversation. sessionUpdates keeps it live: a change
// re-reads the page, and a running turn's transcript entries appear as
// they are written. Deep links: .../turns/N opens a turn, and
// .../interrupts/ID an approval request or hold.
import { useCallback, useEffect, useRef, useState, type FormEvent } from 'react';
import { Link, useParams } from 'react-router';

import { APIError, request } from '../api';
import { AnswerForm, type Answered } from '../answer';
import { ago, stamp, took } from '../format';
import { useNow, useQuery, useSubscription, useTitle } from '../hooks';
import { paths } from '../links';
import {
  archiveMutation,
  budgetMutation,
  closeMutation,
  deleteMutation,
  editMutation,
  promoteMutation,
  resumeMutation,
  retrySessionMutation,
  sendMutation,
  unarchiveMutation,
} from '../queries';
import { useConsole } from '../session';
import { conversation, mergeEntries, type Entry, type Message } from '../transcript';
import { Json, Loading, Problem, Status, useNotify, Value, When } from '../ui';

const inputFields = `identity kind status sequence triggers deliveredAt turn event { id eventType position data }
  command { kind status message sender { kind id } promotedAt }`;

const sessionQuery = `query Session($a: UUID!, $s: String!, $turns: Int!, $focus: Int!) { actions { action(id: $a) {
  id status definition { name kind }
  session(id: $s) {
    id version status reason input state startedAt endsAt createdAt updatedAt running resumable archivedAt displayTitle ambientStatus handoff
    budget { maxUsd spentUsd remainingUsd exhausted } usage { modelCalls inputTokens outputTokens costUsd unpricedCalls }
    predecessor { id } successor { id }
    park { turn cause reason parkedAt expiresAt resumeAt resumeOn }
    origin { id eventType position }
    clock { name cron timezone every startsTurn lastTaken due next }
    inputs(status: PENDING, first: 100) { nodes { ${inputFields} } pageInfo { hasNextPage } }
    approvals { interruptId tool toolVersion input status executionId mayApprove mayReplaceInput response { ...Response } }
    holds { interruptId cause category explanation turn status skipRefusal response { ...Response } }
    turns(first: $turns) { pageInfo { hasNextPage } nodes { ...Turn } }
    focus: turn(number: $focus) { ...Turn }
  } } } }
fragment Response on InterruptResponse { decision reason note input responder at command { turn } }
fragment Turn on ActionSessionTurn {
  number status final startedAt finishedAt endsAt failureScope
  inputs { ${inputFields} }
  checkpoint { state status reason }
  execution { id status attempts error traceId invocation { output transcript(first: 500) { nodes { sequence kind data at } pageInfo { hasNextPage } } } }
}`;

interface Input {
  command: null | { kind: string; status: string; message: string | null; sender: null | { kind: string; id: string }; promotedAt: string | null };
  identity: string;
  kind: string;
  status: string;
  sequence: number;
  triggers: string[];
  deliveredAt: string;
  turn: number | null;
  event: null | { id: string; eventType: string; position: string; data: unknown };
}

interface Turn {
  number: number;
  status: string;
  failureScope: 'TURN' | 'SESSION' | null;
  final: boolean;
  startedAt: string;
  finishedAt: string | null;
  endsAt: string | null;
  inputs: Input[];
  checkpoint: null | { state: unknown; status: string; reason: string | null };
  execution: {
    id: string;
    status: string;
    attempts: number;
    error: string | null;
    traceId: string | null;
    invocation: { output: unknown; transcript: { nodes: Entry[]; pageInfo: { hasNextPage: boolean } } };
  };
}

/** How an interrupt was answered; command.turn is the turn that took the answer. */
interface Response {
  decision: string;
  reason: string | null;
  note: string | null;
  input: unknown;
  responder: string;
  at: string;
  command: null | { turn: number | null };
}

interface Approval {
  interruptId: string;
  tool: string;
  toolVersion: number;
  input: unknown;
  status: string;
  executionId: string;
  mayApprove: boolean;
  mayReplaceInput: boolean;
  response: Response | null;
}

interface Hold {
  interruptId: string;
  cause: string;
  category: string | null;
  explanation: string | null;
  turn: number;
  status: string;
  skipRefusal: string | null;
  response: Response | null;
}

/** What a turn's view needs of the session around it. */
interface Around {
  actionId: string;
  sessionId: string;
  now: number;
  approvals: Map<string, Approval>;
  holds: Map<number, Hold>;
  canRespond: boolean;
}

interface ClockEntry {
  name: string;
  cron: string | null;
  timezone: string | null;
  every: string | null;
  startsTurn: boolean;
  lastTaken: string | null;
  due: string | null;
  next: string | null;
}

interface Session {
  id: string;
  version: number;
  status: string;
  reason: string | null;
  input: unknown;
  state: unknown;
  startedAt: string;
  endsAt: string | null;
  createdAt: string;
  updatedAt: string;
  running: boolean;
  resumable: boolean;
  archivedAt: string | null;
  displayTitle: string | null;
  ambientStatus: string | null;
  handoff: string | null;
  budget: { maxUsd: number | null; spentUsd: number; remainingUsd: number | null; exhausted: boolean };
  usage: { modelCalls: number; inputTokens: number; outputTokens: number; costUsd: number; unpricedCalls: number };
  predecessor: null | { id: string };
  successor: null | { id: string };
  park: Park | null;
  origin: null | { id: string; eventType: string; position: string };
  clock: ClockEntry[];
  inputs: { nodes: Input[]; pageInfo: { hasNextPage: boolean } };
  approvals: Approval[];
  holds: Hold[];
  turns: { pageInfo: { hasNextPage: boolean }; nodes: Turn[] };
  focus: Turn | null;
}

/** A park the session is in (G4). */
interface Park {
  turn: number;
  cause: string;
  reason: string;
  parkedAt: string;
  expiresAt: string;
  resumeAt: string | null;
  resumeOn: string[];
}

interface Answer {
  actions: { action: null | { id: string; status: string; definition: { name: string; kind: string }; session: Session | null } };
}

const sessionSub = `subscription SessionLive($a: UUID!, $s: String!) { sessionUpdates(actionId: $a, id: $s) {
  kind pendingInputs session { status running updatedAt } turn { number status } turnNumber attempt
  transcriptEntry { sequence kind data at } } }`;

interface Update {
  sessionUpdates: {
    kind: 'SESSION' | 'TRANSCRIPT';
    pendingInputs: number;
    session: { status: string; running: boolean; updatedAt: string };
    turn: null | { number: number; status: string };
    turnNumber: number | null;
    attempt: number | null;
    transcriptEntry: Entry | null;
  };
}

const final = (status: string) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(status);

export function SessionScreen() {
  const { actionId = '', sessionId = '', turn: turnParam, interruptId } = useParams();
  const focusTurn = turnParam ? Number(turnParam) : 0;
  useTitle(`Session ${sessionId}`);
  const { can } = useConsole();
  const now = useNow(5000);
  const [pageSize, setPageSize] = useState(20);
  const q = useQuery<Answer>(sessionQuery, { a: actionId, s: sessionId, turns: pageSize, focus: Number.isFinite(focusTurn) ? focusTurn : 0 }, `${actionId}/${sessionId}/${focusTurn}/${pageSize}`);
  const [live, setLive] = useState<Record<number, { attempt: number; entries: Entry[] }>>({});

  // A change of the session re-reads the page, at most every 300 ms.
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const refetch = q.refetch;
  const soon = useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(refetch, 300);
  }, [refetch]);
  useEffect(() => () => clearTimeout(timer.current), []);

  const subError = useSubscription<Update>(sessionSub, { a: actionId, s: sessionId }, `${actionId}/${sessionId}`, (d) => {
    const u = d.sessionUpdates;
    if (u.kind === 'TRANSCRIPT' && u.transcriptEntry && u.turnNumber) {
      const n = u.turnNumber;
      const attempt = u.attempt ?? 1;
      const entry = u.transcriptEntry;
      setLive((l) => {
        const have = l[n];
        const entries = have && have.attempt === attempt ? mergeEntries(have.entries, [entry]) : [entry];
        return { ...l, [n]: { attempt, entries } };
      });
      return;
    }
    soon();
  });

  const action = q.data?.actions.action;
  const s = action?.session;

  if (q.error && !q.data) {
    return (
      <>
        <h1>Session {sessionId}</h1>
        <Problem error={q.error} what="The session could not be read" />
      </>
    );
  }
  if (!q.data) return <Loading what={`session ${sessionId}`} />;
  if (!action || !s) {
    return (
      <>
        <h1>Session {sessionId}</h1>
        <p className="problem" role="alert">
          There is no such session{action ? ` in ${action.definition.name}` : ''}.
        </p>
      </>
    );
  }

  const pendingApprovals = s.approvals.filter((a) => a.status === 'PENDING');
  const pendingHolds = s.holds.filter((h) => h.status === 'PENDING');
  const linked = interruptId ? (s.approvals.find((a) => a.interruptId === interruptId) ?? s.holds.find((h) => h.interruptId === interruptId)) : undefined;
  const turns = [...s.turns.nodes];
  if (s.focus && !turns.some((t) => t.number === s.focus?.number)) turns.push(s.focus);
  const around: Around = {
    actionId: action.id,
    sessionId: s.id,
    now,
    approvals: new Map(s.approvals.map((a) => [a.interruptId, a])),
    holds: new Map(s.holds.map((h) => [h.turn, h])),
    canRespond: can.respond(action.id),
  };

  return (
    <>
      <div className="title-line">
        <h1>
          Session <span className="mono">{s.id}</span>
        </h1>
        <Status value={s.status} running={s.running} />
        {s.archivedAt ? <span className="tag">archived</span> : null}
      </div>
      {s.displayTitle || s.ambientStatus ? (
        <p className="lede">
          {s.displayTitle ? <strong>{s.displayTitle}</strong> : null}
          {s.displayTitle && s.ambientStatus ? ' · ' : null}
          {s.ambientStatus ? <span className="muted">{s.ambientStatus}</span> : null}
        </p>
      ) : null}
      <p className="crumbs">
        <Link to={paths.action(action.id)}>{action.definition.name}</Link> · <Link to={paths.sessions(action.id)}>its sessions</Link>
        {' · '}
        version {s.version}
        {pendingHolds.length ? (
          <> · turn {pendingHolds[0].turn} is held: it waits for a retry or a skip</>
        ) : s.reason ? (
          <> · reason: {s.reason}</>
        ) : null}
      </p>
      <Problem error={q.error} what="The last update could not be read" />
      <Problem error={subError} what="Live updates stopped" />

      {interruptId ? <LinkedInterrupt id={interruptId} found={linked} /> : null}

      {pendingApprovals.length + pendingHolds.length > 0 ? (
        <section aria-labelledby="waits" className="waits">
          <h2 id="waits">Waiting for an answer</h2>
          {pendingHolds.map((h) => (
            <Interrupt key={h.interruptId} actionId={action.id} sessionId={s.id} hold={h} highlight={h.interruptId === interruptId} onChange={q.refetch} />
          ))}
          {pendingApprovals.map((a) => (
            <Interrupt key={a.interruptId} actionId={action.id} sessionId={s.id} approval={a} highlight={a.interruptId === interruptId} onChange={q.refetch} />
          ))}
        </section>
      ) : null}

      {s.resumable ? <Resumable actionId={action.id} sessionId={s.id} park={s.park} now={now} canResume={can.respond(action.id)} onResumed={q.refetch} /> : null}

      <div className="facts">
        <section aria-labelledby="about">
          <h2 id="about">About</h2>
          <dl className="kv">
            <div>
              <dt>Started</dt>
              <dd>
                <When iso={s.startedAt} now={now} /> ({stamp(s.startedAt)})
              </dd>
            </div>
            <div>
              <dt>Ends</dt>
              <dd>{s.endsAt ? <><When iso={s.endsAt} now={now} /> ({stamp(s.endsAt)})</> : 'no end'}</dd>
            </div>
            <div>
              <dt>Last change</dt>
              <dd>
                <When iso={s.updatedAt} now={now} />
              </dd>
            </div>
            <div>
              <dt>Origin</dt>
              <dd>{s.origin ? <>{s.origin.eventType} at position {s.origin.position}</> : '—'}</dd>
            </div>
            <div>
              <dt>Spend</dt>
              <dd>
                <Spend s={s} />
              </dd>
            </div>
            {s.predecessor ? (
              <div>
                <dt>Continues</dt>
                <dd>
                  <Link to={paths.session(action.id, s.predecessor.id)}>{s.predecessor.id}</Link>
                </dd>
              </div>
            ) : null}
            {s.successor ? (
              <div>
                <dt>Continued by</dt>
                <dd>
                  <Link to={paths.session(action.id, s.successor.id)}>{s.successor.id}</Link>
                </dd>
              </div>
            ) : null}
            {s.handoff ? (
              <div>
                <dt>Handoff note</dt>
                <dd>{s.handoff}</dd>
              </div>
            ) : null}
          </dl>
          {/* A cap counts an agent's model calls (G8): other handlers are offered none, unless one is set to remove. */}
          {can.close(action.id) && !final(s.status) && (action.definition.kind === 'agent' || s.budget.maxUsd !== null) ? <BudgetForm actionId={action.id} sessionId={s.id} current={s.budget.maxUsd} onDone={q.refetch} /> : null}
          {can.respond(action.id) && s.status === 'FAILED' && !s.successor ? <RetrySession actionId={action.id} sessionId={s.id} onDone={q.refetch} /> : null}
          {can.close(action.id) ? <ArchiveButton actionId={action.id} sessionId={s.id} archived={s.archivedAt !== null} onDone={q.refetch} /> : null}
          {can.close(action.id) && !final(s.status) ? <CloseSession actionId={action.id} sessionId={s.id} onClosed={q.refetch} /> : null}
        </section>
        <section aria-labelledby="input">
          <h2 id="input">Input</h2>
          <Value value={s.input} label="Session input" />
          <h2>State</h2>
          <Json value={s.state} label="Session state" />
        </section>
      </div>

      <section aria-labelledby="pending">
        <h2 id="pending">Pending inputs ({s.inputs.nodes.length}{s.inputs.pageInfo.hasNextPage ? '+' : ''})</h2>
        {s.inputs.nodes.length === 0 ? (
          <p className="muted">None: every input delivered has been taken by a turn.</p>
        ) : (
          <Inputs inputs={s.inputs.nodes} now={now} steer={can.respond(action.id) ? { actionId: action.id, sessionId: s.id, onChange: q.refetch } : undefined} />
        )}
        {can.respond(action.id) && !final(s.status) ? <Composer actionId={action.id} sessionId={s.id} running={s.running} onSent={q.refetch} /> : null}
      </section>

      {s.clock.length > 0 ? (
        <section aria-labelledby="clock">
          <h2 id="clock">Clock</h2>
          <table className="rows">
            <thead>
              <tr>
                <th scope="col">Entry</th>
                <th scope="col">Schedule</th>
                <th scope="col">Starts a turn</th>
                <th scope="col">Last taken</th>
                <th scope="col">Due now</th>
                <th scope="col">Next firing</th>
              </tr>
            </thead>
            <tbody>
              {s.clock.map((c) => (
                <tr key={c.name}>
                  <th scope="row">{c.name}</th>
                  <td data-label="Schedule">{c.cron ? `${c.cron} (${c.timezone ?? 'UTC'})` : `every ${c.every}`}</td>
                  <td data-label="Starts a turn">{c.startsTurn ? 'yes' : 'no, rides along with the next turn'}</td>
                  <td data-label="Last taken">{c.lastTaken ? stamp(c.lastTaken) : '—'}</td>
                  <td data-label="Due now">{c.due ? stamp(c.due) : '—'}</td>
                  <td data-label="Next firing">{c.next ? <>{stamp(c.next)} (<When iso={c.next} now={now} />)</> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      ) : null}

      <section aria-labelledby="turns">
        <h2 id="turns">Turns, newest first</h2>
        {turns.length === 0 ? <p className="muted">No turn yet.</p> : null}
        <ol className="turns" reversed>
          {turns.map((t) => (
            <TurnView key={t.number} t={t} around={around} live={live[t.number]} focus={t.number === focusTurn} />
          ))}
        </ol>
        {s.turns.pageInfo.hasNextPage ? (
          <button type="button" onClick={() => setPageSize((n) => Math.min(500, n * 2))}>
            Show older turns
          </button>
        ) : null}
      </section>
    </>
  );
}

function LinkedInterrupt({ id, found }: { id: string; found?: Approval | Hold }) {
  if (!found) {
    return (
      <p className="problem" role="alert">
        This session has no interrupt {id}.
      </p>
    );
  }
  if (found.status === 'PENDING') return null; // shown below, highlighted
  const r = found.response;
  return (
    <p className="notice notice-info" role="status">
      The {'tool' in found ? 'approval request' : 'hold'} you followed a link to{' '}
      {found.status === 'ANSWERED' && r ? (
        <>
          was answered: {decided[r.decision] ?? r.decision} by {r.responder}, {stamp(r.at)}.
        </>
      ) : (
        <>no longer waits: the session closed or went on without it.</>
      )}
    </p>
  );
}

function Interrupt({
  actionId,
  sessionId,
  approval,
  hold,
  highlight,
  onChange,
}: {
  actionId: string;
  sessionId: string;
  approval?: Approval;
  hold?: Hold;
  highlight: boolean;
  onChange: () => void;
}) {
  const notify = useNotify();
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    if (highlight) {
      ref.current?.scrollIntoView({ block: 'center' });
      ref.current?.focus();
    }
  }, [highlight]);
  const interruptId = (approval ?? hold)!.interruptId;
  const item = {
    interruptId,
    kind: approval ? ('APPROVAL' as const) : ('HOLD' as const),
    action: { id: actionId },
    session: { id: sessionId, status: '' },
    approval: approval
      ? {
          tool: approval.tool,
          toolVersion: approval.toolVersion,
          input: approval.input,
          status: approval.status,
          mayApprove: approval.mayApprove,
          mayReplaceInput: approval.mayReplaceInput,
          response: null,
        }
      : null,
    hold: hold ? { ...hold, response: null } : null,
  };
  const done = (a: Answered) => {
    notify(`${a.decision === 'RETRY' ? 'Retry sent' : a.decision === 'SKIP' ? 'Skipped' : a.decision === 'APPROVE' ? 'Approved' : 'Denied'}: the session goes on.`, 'ok');
    onChange();
  };
  const gone = (e: APIError) => {
    notify(`Not answered: ${e.message}`, 'warn');
    onChange();
  };
  return (
    <article ref={ref} tabIndex={-1} className={`item item-${item.kind.toLowerCase()}${highlight ? ' highlight' : ''}`} aria-labelledby={`i-${interruptId}`} data-interrupt={interruptId}>
      <div className="item-head">
        <span className={`tag tag-${item.kind.toLowerCase()}`}>{approval ? 'Approval' : 'Held turn'}</span>
        <h3 id={`i-${interruptId}`}>
          <Link to={paths.interrupt(actionId, sessionId, interruptId)}>
            {approval ? (
              <>
                <code>{approval.tool}</code> (version {approval.toolVersion})
              </>
            ) : (
              <>Turn {hold?.turn} is held</>
            )}
          </Link>
        </h3>
      </div>
      {approval ? <Value value={approval.input} label="The call's input" /> : null}
      {hold ? (
        <p>
          {holdWhy(hold.cause)}
          {hold.category ? ` (${hold.category})` : ''}
          {hold.explanation ? `: ${hold.explanation}` : '.'}
        </p>
      ) : null}
      <AnswerForm item={item} onAnswered={done} onGone={gone} />
    </article>
  );
}

/**
 * A session that waits after a turn failed with scope TURN, was
 * interrupted, or is parked (G4, G9, G10): why, and a button to resume it.
 */
function Resumable({ actionId, sessionId, park, now, canResume, onResumed }: { actionId: string; sessionId: string; park: Park | null; now: number; canResume: boolean; onResumed: () => void }) {
  const { token } = useConsole();
  const notify = useNotify();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<APIError | null>(null);
  const resume = async () => {
    setBusy(true);
    setError(null);
    try {
      await request(resumeMutation, { a: actionId, s: sessionId }, token);
      notify(`Session ${sessionId} is resumed: its pending inputs get a turn now.`, 'ok');
      onResumed();
    } catch (err) {
      setError(err as APIError);
    }
    setBusy(false);
  };
  return (
    <section aria-labelledby="resumable" className="waits">
      <h2 id="resumable">{park ? 'Parked' : 'Waiting after a failed turn'}</h2>
      {park ? (
        <>
          <p>
            Turn {park.turn} ran out of retries ({park.cause}): {park.reason}
          </p>
          <p>
            Parked <When iso={park.parkedAt} now={now} />.{' '}
            {park.resumeAt ? (
              <>
                Resumes by itself <When iso={park.resumeAt} now={now} /> ({stamp(park.resumeAt)}).{' '}
              </>
            ) : null}
            {park.resumeOn.length ? <>An event from {park.resumeOn.join(' or ')} resumes it. </> : null}
            Unless resumed, the session fails <When iso={park.expiresAt} now={now} /> ({stamp(park.expiresAt)}).
          </p>
        </>
      ) : (
        <p>Its last turn failed only itself or was interrupted; its inputs are still pending. The next input wakes it, or resume it now.</p>
      )}
      {canResume ? (
        <button type="button" onClick={resume} disabled={busy}>
          Resume now
        </button>
      ) : (
        <p className="muted">Resuming needs the RESPOND permission on this action.</p>
      )}
      <Problem error={error} what="Not resumed" />
    </section>
  );
}

function CloseSession({ actionId, sessionId, onClosed }: { actionId: string; sessionId: string; onClosed: () => void }) {
  const { token } = useConsole();
  const notify = useNotify();
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState('');
  const [handoff, setHandoff] = useState('');
  const [successor, setSuccessor] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<APIError | null>(null);
  const field = useRef<HTMLTextAreaElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (open) field.current?.focus();
  }, [open]);
  if (!open) {
    return (
      <button type="button" ref={opener} className="danger" onClick={() => setOpen(true)}>
        Close this session…
      </button>
    );
  }
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!reason.trim()) {
      setError(new APIError([{ message: 'Give a reason: it is recorded with the session.', extensions: { code: '' } }]));
      return;
    }
    setBusy(true);
    try {
      const r = await request<{ actions: { closeSession: null | { successor: null | { id: string } } } }>(
        closeMutation,
        { a: actionId, s: sessionId, reason: reason.trim(), handoff: handoff.trim() || null, successor },
        token,
      );
      const next = r.actions.closeSession?.successor?.id;
      notify(next ? `Session ${sessionId} is closed; ${next} continues it with the handoff note.` : `Session ${sessionId} is closed (CANCELLED).`, 'ok');
      setOpen(false);
      onClosed();
    } catch (err) {
      setError(err as APIError);
    }
    setBusy(false);
  };
  return (
    <form className="close" onSubmit={submit} aria-label="Close the session">
      <label htmlFor="close-reason">Reason for closing (recorded; the session takes no more inputs)</label>
      <textarea id="close-reason" ref={field} rows={2} value={reason} onChange={(e) => setReason(e.target.value)} disabled={busy} aria-required="true" />
      <label htmlFor="close-handoff">Handoff note (optional, kept on the session; a successor gets it as its first input)</label>
      <textarea id="close-handoff" rows={3} maxLength={20000} value={handoff} onChange={(e) => setHandoff(e.target.value)} disabled={busy} />
      <label className="check">
        <input type="checkbox" checked={successor} onChange={(e) => setSuccessor(e.target.checked)} disabled={busy} /> Start a successor session for the same input
      </label>
      <div className="buttons">
        <button type="submit" className="danger" disabled={busy}>
          Close session
        </button>
        <button
          type="button"
          onClick={() => {
            setOpen(false);
            setTimeout(() => opener.current?.focus());
          }}
          disabled={busy}
        >
          Cancel
        </button>
      </div>
      <Problem error={error} what="Not closed" />
    </form>
  );
}

/** Sends the session a message, or interrupts its running turn (G1, G9). */
function Composer({ actionId, sessionId, running, onSent }: { actionId: string; sessionId: string; running: boolean; onSent: () => void }) {
  const { token } = useConsole();
  const notify = useNotify();
  const [text, setText] = useState('');
  // One key per message composed: sending it again after an error is the same request.
  const key = useRef(crypto.randomUUID());
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<APIError | null>(null);
  const send = async (vars: Record<string, unknown>, done: string) => {
    setBusy(true);
    setError(null);
    try {
      await request(sendMutation, { a: actionId, s: sessionId, ...vars }, token);
      notify(done, 'ok');
      onSent();
      return true;
    } catch (err) {
      setError(err as APIError);
      return false;
    } finally {
      setBusy(false);
    }
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!text.trim()) {
      setError(new APIError([{ message: 'Write a message first.', extensions: { code: '' } }]));
      return;
    }
    if (await send({ m: text, c: null, k: key.current }, 'Message sent: the next turn takes it.')) {
      setText('');
      key.current = crypto.randomUUID();
    }
  };
  return (
    <form className="composer" onSubmit={submit} aria-label="Send the session a message">
      <label htmlFor="composer-text">Message to the session (its next turn reads it; a running turn is not interrupted)</label>
      <textarea id="composer-text" rows={2} value={text} onChange={(e) => setText(e.target.value)} disabled={busy} />
      <div className="buttons">
        <button type="submit" disabled={busy}>
          Send message
        </button>
        {running ? (
          <button type="button" className="danger" disabled={busy} onClick={() => void send({ m: null, c: 'INTERRUPT', k: crypto.randomUUID() }, 'Interrupt sent: the running turn ends without committing.')}>
            Interrupt the running turn
          </button>
        ) : null}
      </div>
      <Problem error={error} what="Not sent" />
    </form>
  );
}

/** Archives the session or shows it again (G6). */
function ArchiveButton({ actionId, sessionId, archived, onDone }: { actionId: string; sessionId: string; archived: boolean; onDone: () => void }) {
  const { token } = useConsole();
  const notify = useNotify();
  const [error, setError] = useState<APIError | null>(null);
  const click = async () => {
    try {
      await request(archived ? unarchiveMutation : archiveMutation, { a: actionId, s: sessionId }, token);
      notify(archived ? `Session ${sessionId} is shown in lists again.` : `Session ${sessionId} is archived: hidden from lists, working as before.`, 'ok');
      onDone();
    } catch (err) {
      setError(err as APIError);
    }
  };
  return (
    <>
      <button type="button" onClick={() => void click()}>
        {archived ? 'Unarchive' : 'Archive'}
      </button>
      <Problem error={error} what="Not changed" />
    </>
  );
}

interface Steer {
  actionId: string;
  sessionId: string;
  onChange: () => void;
}

/** Edit, delete or run next a pending message (G2). */
function MessageControls({ input, steer }: { input: Input; steer: Steer }) {
  const { token } = useConsole();
  const notify = useNotify();
  const [error, setError] = useState<APIError | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const act = async (mutation: string, done: string, extra: Record<string, unknown> = {}) => {
    try {
      await request(mutation, { a: steer.actionId, s: steer.sessionId, n: input.sequence, ...extra }, token);
      notify(done, 'ok');
      setEditing(null);
      steer.onChange();
    } catch (err) {
      setError(err as APIError);
    }
  };
  if (editing !== null) {
    return (
      <form
        className="edit-message"
        aria-label={`Edit message #${input.sequence}`}
        onSubmit={(e) => {
          e.preventDefault();
          void act(editMutation, 'The message is changed: the next turn reads the new text.', { m: editing });
        }}
      >
        <label htmlFor={`edit-${input.sequence}`}>New text of message #{input.sequence}</label>
        <textarea id={`edit-${input.sequence}`} rows={2} value={editing} onChange={(e) => setEditing(e.target.value)} />
        <span className="buttons inline">
          <button type="submit">Save</button>
          <button type="button" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </span>
        <Problem error={error} what="Not changed" />
      </form>
    );
  }
  return (
    <span className="buttons inline">
      <button type="button" onClick={() => setEditing(input.command?.message ?? '')}>
        Edit
      </button>
      <button type="button" onClick={() => void act(promoteMutation, 'The message runs next.')}>
        Run next
      </button>
      <button type="button" className="danger" onClick={() => void act(deleteMutation, 'The message is deleted.')}>
        Delete
      </button>
      <Problem error={error} what="Not changed" />
    </span>
  );
}

function Inputs({ inputs, now, steer }: { inputs: Input[]; now: number; steer?: Steer }) {
  return (
    <ul className="inputs">
      {inputs.map((i) => (
        <li key={i.identity}>
          <span className="tag">{i.command?.kind ?? i.kind}</span>{' '}
          {i.command?.message ? (
            <>
              <span>{i.command.message}</span>
              {i.command.sender ? <span className="muted"> · from {i.command.sender.id}</span> : null}
              {i.command.promotedAt ? <span className="muted"> · runs next</span> : null}
              {steer && i.command.kind === 'MESSAGE' && i.status === 'PENDING' ? <MessageControls input={i} steer={steer} /> : null}
            </>
          ) : (
            <span className="mono">{i.event?.eventType ?? i.identity}</span>
          )}
          {i.triggers.length ? <span className="muted"> · trigger {i.triggers.join(', ')}</span> : null}
          <span className="muted">
            {' '}
            · #{i.sequence}, delivered <When iso={i.deliveredAt} now={now} />
          </span>
          {i.event ? (
            <details>
              <summary>Event data (position {i.event.position})</summary>
              <Json value={i.event.data} />
            </details>
          ) : null}
        </li>
      ))}
    </ul>
  );
}

function TurnView({ t, around, live, focus }: { t: Turn; around: Around; live?: { attempt: number; entries: Entry[] }; focus: boolean }) {
  const { actionId, sessionId, now } = around;
  const hold = t.status === 'HELD' ? around.holds.get(t.number) : undefined;
  const ref = useRef<HTMLLIElement>(null);
  useEffect(() => {
    if (focus) {
      ref.current?.scrollIntoView({ block: 'start' });
      ref.current?.querySelector<HTMLElement>('h3 a')?.focus();
    }
  }, [focus]);
  const committed = t.execution.invocation.transcript.nodes;
  const showLive = t.status === 'RUNNING' && live && live.entries.length > 0;
  const entries = showLive ? live.entries : committed.length ? committed : (live?.entries ?? []);
  const msgs = conversation(entries);
  return (
    <li ref={ref} className={`turn${focus ? ' highlight' : ''}`} aria-labelledby={`turn-${t.number}`} data-turn={t.number}>
      <div className="item-head">
        <h3 id={`turn-${t.number}`}>
          <Link to={paths.turn(actionId, sessionId, t.number)}>Turn {t.number}</Link>
        </h3>
        <Status value={t.status} />
        {t.final ? <span className="tag">final</span> : null}
        {t.failureScope === 'TURN' ? <span className="tag">failed only this turn</span> : null}
        <span className="muted">
          started <When iso={t.startedAt} now={now} />, {t.finishedAt ? `took ${took(t.startedAt, t.finishedAt, now)}` : `running for ${took(t.startedAt, null, now)}`}
          {t.execution.attempts > 1 ? `, ${t.execution.attempts} attempts` : ''}
        </span>
      </div>
      {hold ? <HeldView t={t} hold={hold} around={around} /> : t.execution.error ? <p className="problem">Error: {t.execution.error}</p> : null}
      <details open={focus || t.status === 'RUNNING' || undefined}>
        <summary>Inputs ({t.inputs.length})</summary>
        <Inputs inputs={t.inputs} now={now} />
      </details>
      <section className="conversation" aria-label={`Transcript of turn ${t.number}`}>
        {msgs.length === 0 ? <p className="muted">{t.status === 'RUNNING' ? 'Waiting for the first transcript entry…' : 'No transcript.'}</p> : null}
        {showLive ? (
          <p className="muted live-note" role="status">
            Live: entries of attempt {live.attempt} as they are written.
          </p>
        ) : null}
        {msgs.map((m) => (
          <MessageView key={m.seq} m={m} around={around} />
        ))}
      </section>
      {t.checkpoint ? (
        <details open={focus || undefined}>
          <summary>
            Checkpoint: {t.checkpoint.status}
            {hold ? ' (the turn is held: the state is as it was before it)' : t.checkpoint.reason ? ` (${t.checkpoint.reason})` : ''}
          </summary>
          <Json value={t.checkpoint.state} label={`State after turn ${t.number}`} />
        </details>
      ) : null}
      {t.execution.invocation.output !== null && t.execution.invocation.output !== undefined ? (
        <details open={focus || undefined}>
          <summary>Output</summary>
          <Json value={t.execution.invocation.output} label={`Output of turn ${t.number}`} />
        </details>
      ) : null}
      <p className="muted small">
        Execution <span className="mono">{t.execution.id}</span>
        {t.execution.traceId ? (
          <>
            {' '}
            · trace <span className="mono">{t.execution.traceId}</span>
          </>
        ) : null}
      </p>
    </li>
  );
}

/** A tool result's text as the JSON it holds, when it holds JSON. */
function parsed(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

function MessageView({ m, around }: { m: Message; around: Around }) {
  const { actionId, sessionId, now } = around;
  switch (m.type) {
    case 'user':
      return (
        <div className="msg msg-user">
          <span className="who-label">Turn input</span>
          <pre className="text">{m.text}</pre>
        </div>
      );
    case 'model':
      return (
        <div className="msg msg-model">
          <span className="who-label">Model</span>
          {m.text ? <p className="text">{m.text}</p> : null}
          {!m.text && m.calls.length === 0 ? <p className="muted">No text{m.stop ? ` (stopped: ${m.stop})` : ''}.</p> : null}
          {m.calls.length ? (
            <ul className="calls">
              {m.calls.map((c, i) => (
                <li key={i}>
                  calls <code>{c.name}</code>
                  <Json value={c.input} />
                </li>
              ))}
            </ul>
          ) : null}
        </div>
      );
    case 'tool':
      return (
        <div className={`msg msg-tool${m.nested ? ' msg-nested' : ''}${m.result?.error ? ' msg-error' : ''}`}>
          <span className="who-label">
            Tool call <code>{m.tool}</code>
            {m.via ? ` via ${m.via}` : ''}
          </span>
          {m.input !== undefined ? <Json value={m.input} label="Tool input" /> : null}
          {m.result ? (
            <>
              <span className="who-label">{m.result.error ? 'Error' : 'Result'}</span>
              <Json value={parsed(m.result.content)} label="Tool result" />
            </>
          ) : null}
        </div>
      );
    case 'approval':
      return (
        <div className="msg msg-approval">
          <span className="who-label">
            Approval requested for <code>{m.tool}</code>
          </span>
          <Json value={m.input} />
          {m.interruptId ? <Link to={paths.interrupt(actionId, sessionId, m.interruptId)}>Link to this request</Link> : null}
          <Answer what="approval" found={around.approvals.get(m.interruptId)} around={around} interruptId={m.interruptId} />
        </div>
      );
    case 'answer':
      return (
        <div className={`msg msg-answer answer-${m.decision.toLowerCase()}`}>
          <span className="who-label">
            {decided[m.decision] ?? m.decision} by {m.responder ?? 'someone'}
            {m.tool ? (
              <>
                {' '}
                for <code>{m.tool}</code>
              </>
            ) : null}
            {' · '}
            <When iso={m.at} now={now} />
          </span>
          {m.reason ? <p className="text">“{m.reason}”</p> : null}
          {m.input !== undefined && m.input !== null ? <Json value={m.input} label="Replacement input" /> : null}
          {m.ignored ? <p className="muted">{m.ignored}</p> : null}
        </div>
      );
    case 'refusal':
      return (
        <div className="msg msg-refusal">
          <span className="who-label">Model refused{m.category ? ` (${m.category})` : ''}</span>
          <p className="text">{m.explanation ?? m.text ?? ''}</p>
        </div>
      );
    case 'note':
      return (
        <div className="msg msg-note">
          <span className="who-label">Note</span>
          <p className="text">{m.text}</p>
        </div>
      );
    case 'outcome':
      return (
        <div className="msg msg-outcome">
          <span className="who-label">Outcome: {m.status}</span>
          {m.reason ? <p className="text">{m.reason}</p> : null}
          {m.waitingOn?.length && !m.reason ? <p className="muted">waiting on {plural(m.waitingOn.length, 'approval')}</p> : null}
          {m.state !== null && m.state !== undefined ? <Json value={m.state} label="Reported state" /> : null}
        </div>
      );
    default:
      return (
        <div className="msg msg-other">
          <span className="who-label">{m.kind}</span>
          <Json value={m.data} />
        </div>
      );
  }
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

const decided: Record<string, string> = { APPROVE: 'Approved', DENY: 'Denied', RETRY: 'Retried', SKIP: 'Skipped' };

/**
 * How an approval request or a hold was answered, where it shows in the
 * turn that raised it: the decision, who and when, the reason or note, a
 * replacement input, and the turn that took the answer; or that it still
 * waits (with what a person does about it), or no longer does.
 */
function Answer({ what, found, around, interruptId }: { what: 'approval' | 'hold'; found?: Approval | Hold; around: Around; interruptId: string }) {
  const { actionId, sessionId, now } = around;
  if (!found) return null;
  const link = paths.interrupt(actionId, sessionId, interruptId);
  if (found.status === 'PENDING') {
    return (
      <p className="answered answered-pending">
        <strong>Waiting for an answer.</strong>{' '}
        {around.canRespond ? (
          <Link to={link}>{what === 'hold' ? 'Retry or skip it' : 'Approve or deny it'}</Link>
        ) : (
          <>Someone who may respond on this action can {what === 'hold' ? 'retry or skip it' : 'approve or deny it'} from the inbox.</>
        )}
      </p>
    );
  }
  const r = found.response;
  if (found.status !== 'ANSWERED' || !r) {
    return (
      <p className="answered answered-closed">
        <strong>No longer waits:</strong> the session closed, or went on without an answer.
      </p>
    );
  }
  const words = r.reason ?? r.note;
  const later = r.command?.turn;
  const took = { APPROVE: 'The call ran in', DENY: 'The agent was told in', RETRY: 'Its inputs ran again in', SKIP: 'The session went on in' }[r.decision] ?? 'Taken in';
  return (
    <div className={`answered answered-${r.decision.toLowerCase()}`}>
      <p className="answered-head">
        <strong>
          {decided[r.decision] ?? r.decision} by {r.responder}
        </strong>{' '}
        <span className="muted">
          ·{' '}
          <time dateTime={r.at} title={stamp(r.at)}>
            {ago(r.at, now)}
          </time>
        </span>
      </p>
      {words ? <blockquote className="said">{words}</blockquote> : null}
      {r.input !== null && r.input !== undefined ? (
        <>
          <p className="small muted">Run with this input instead of the model's:</p>
          <Json value={r.input} label="Replacement input" />
        </>
      ) : null}
      {later ? (
        <p>
          {took} <Link to={paths.turn(actionId, sessionId, later)}>turn {later}</Link>.
        </p>
      ) : r.decision === 'SKIP' ? (
        <p>Its inputs were set aside and the session went on.</p>
      ) : null}
    </div>
  );
}

/** A held turn: why it is held, and how the hold was answered (H1-H4). */
function HeldView({ t, hold, around }: { t: Turn; hold: Hold; around: Around }) {
  const detail = hold.cause !== 'REFUSED' && t.execution.error ? t.execution.error.replace(/^(agent_unfinished|budget_exhausted): /, '') : null;
  return (
    <section className="held" aria-label={`Why turn ${t.number} is held`}>
      <p>
        <strong>Held:</strong> {holdWhy(hold.cause).toLowerCase()}
        {hold.category ? <> (category {hold.category})</> : null}
        {hold.explanation && hold.cause !== 'REFUSED' ? <>: {hold.explanation}</> : null}. Nothing it did was committed.
        {detail ? <span className="muted"> ({detail})</span> : null}
      </p>
      <Answer what="hold" found={hold} around={around} interruptId={hold.interruptId} />
    </section>
  );
}

/** Why a turn is held, by the hold's cause (H1, G8). */
function holdWhy(cause: string): string {
  switch (cause) {
    case 'REFUSED':
      return 'The model refused to go on';
    case 'BUDGET':
      return 'The session reached its spend cap: raise it (Spend, above), then retry';
    default:
      return 'No outcome after the retries';
  }
}

/** What the session's model calls cost, against its cap (G8). */
function Spend({ s }: { s: Session }) {
  const { budget: b, usage: u } = s;
  const usd = (v: number) => `$${v < 0.01 && v > 0 ? v.toFixed(6) : v.toFixed(2)}`;
  return (
    <>
      {usd(b.spentUsd)}
      {b.maxUsd !== null ? (
        <>
          {' '}
          of {usd(b.maxUsd)} {b.exhausted ? <span className="tag">cap reached</span> : <span className="muted">({usd(b.remainingUsd ?? 0)} left)</span>}
        </>
      ) : (
        <span className="muted"> (no cap)</span>
      )}
      {u.modelCalls > 0 ? (
        <span className="muted">
          {' '}
          · {u.modelCalls} model call{u.modelCalls === 1 ? '' : 's'}, {u.inputTokens} in / {u.outputTokens} out tokens
          {u.unpricedCalls > 0 ? `, ${u.unpricedCalls} not priced` : ''}
        </span>
      ) : null}
    </>
  );
}

/** Sets the session's spend cap (G8). */
function BudgetForm({ actionId, sessionId, current, onDone }: { actionId: string; sessionId: string; current: number | null; onDone: () => void }) {
  const { token } = useConsole();
  const notify = useNotify();
  const [value, setValue] = useState(current === null ? '' : String(current));
  const [error, setError] = useState<APIError | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const max = value.trim() === '' ? null : Number(value);
    if (max !== null && !(max > 0)) {
      setError(new APIError([{ message: 'A cap is a number of US dollars above 0, or empty for no cap.', extensions: { code: '' } }]));
      return;
    }
    try {
      await request(budgetMutation, { a: actionId, s: sessionId, max }, token);
      notify(max === null ? 'The session has no spend cap now.' : `The session's spend cap is $${max} now.`, 'ok');
      setError(null);
      onDone();
    } catch (err) {
      setError(err as APIError);
    }
  };
  return (
    <form className="budget" onSubmit={submit} aria-label="Set the spend cap">
      <label htmlFor="budget-max">Spend cap in US dollars (empty: none)</label>
      <span className="buttons inline">
        <input id="budget-max" inputMode="decimal" value={value} onChange={(e) => setValue(e.target.value)} size={10} />
        <button type="submit">Set cap</button>
      </span>
      <Problem error={error} what="Not changed" />
    </form>
  );
}

/** Retries a FAILED session as its successor (G5). */
function RetrySession({ actionId, sessionId, onDone }: { actionId: string; sessionId: string; onDone: () => void }) {
  const { token } = useConsole();
  const notify = useNotify();
  const [error, setError] = useState<APIError | null>(null);
  const click = async () => {
    try {
      const r = await request<{ actions: { retrySession: null | { id: string } } }>(retrySessionMutation, { a: actionId, s: sessionId }, token);
      notify(`Retried as session ${r.actions.retrySession?.id ?? ''}, with this session's pending inputs.`, 'ok');
      onDone();
    } catch (err) {
      setError(err as APIError);
    }
  };
  return (
    <>
      <button type="button" onClick={() => void click()}>
        Retry as a new session
      </button>
      <Problem error={error} what="Not retried" />
    </>
  );
}
