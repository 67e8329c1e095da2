// One action: its definition, its versions side by side as a diff, the
// trigger diagnostics (predicates that failed on events), the intake
// records (events that matched but could not start or resume a session)
// and a dry run: a proposed definition judged over past events beside the
// current one, the two outcomes compared.
import { useEffect, useMemo, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';

import { APIError, request, unauthenticated } from '../api';
import { fold, sideBySide, unified, type Line, type Row } from '../diff';
import {
  compareIntake,
  compareTriggers,
  definitionInput,
  dryRunQuery,
  fieldName,
  fieldPart,
  parseDefinition,
  parseRange,
  shortOf,
  triggerCounts,
  type DryRun,
  type DryRunAnswer,
  type FieldProblem,
  type TriggerCount,
} from '../dryrun';
import { pretty, stamp } from '../format';
import { narrowQuery, useMedia, useNow, useQuery, useTitle } from '../hooks';
import { paths } from '../links';
import { useConsole } from '../session';
import { Json, Loading, Problem, Status, When } from '../ui';

const definitionFields = `name kind config source
  triggers { name event schedule { cron timezone every } session { start { input } resume { id } } }
  session { inputSchema id ends schedule { name cron timezone every } turns { on maxInputs maxBytes window } }
  tool { name description inputSchema approval session { start { input } } }
  permissions { read write tools sessions }
  mcp { name description inputSchema session { start { input } resume { id } } }
  concurrency { limit key }`;

const actionQuery = `query Action($a: UUID!) { actions { action(id: $a) {
  id status version createdAt updatedAt
  versions { version createdAt author fromPosition definition { ${definitionFields} } }
  schedules { trigger cron timezone every active fired missed lastFiredAt dueAt nextFirings(count: 3) }
  triggerDiagnostics { version trigger count lastMessage lastAt lastEvent { id eventType position } }
  intakeRecords(first: 50) { pageInfo { hasNextPage } nodes { id version trigger sessionId reason message createdAt event { id eventType position } } }
} } }`;

interface Version {
  version: number;
  createdAt: string;
  author: string | null;
  fromPosition: string;
  definition: Record<string, unknown> & { name: string; kind: string };
}

/** A schedule trigger's clock (A4). */
interface Schedule {
  trigger: string;
  cron: string | null;
  timezone: string | null;
  every: string | null;
  active: boolean;
  fired: number;
  missed: number;
  lastFiredAt: string | null;
  dueAt: string | null;
  nextFirings: string[];
}

interface Answer {
  actions: {
    action: null | {
      id: string;
      status: string;
      version: number;
      createdAt: string;
      updatedAt: string;
      versions: Version[];
      schedules: Schedule[];
      triggerDiagnostics: { version: number; trigger: string; count: number; lastMessage: string; lastAt: string; lastEvent: null | { id: string; eventType: string; position: string } }[];
      intakeRecords: {
        pageInfo: { hasNextPage: boolean };
        nodes: { id: string; version: number; trigger: string; sessionId: string | null; reason: string; message: string; createdAt: string; event: { id: string; eventType: string; position: string } }[];
      };
    };
  };
}

/** A definition without empty parts, as indented JSON (what the diff compares). */
function shown(def: Record<string, unknown>): string {
  const clean = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(clean);
    if (v && typeof v === 'object') {
      return Object.fromEntries(
        Object.entries(v)
          .filter(([, x]) => x !== null && x !== undefined)
          .map(([k, x]) => [k, clean(x)]),
      );
    }
    return v;
  };
  return pretty(clean(def));
}

export function ActionScreen() {
  const { actionId = '' } = useParams();
  const [params, setParams] = useSearchParams();
  const now = useNow(30_000);
  const q = useQuery<Answer>(actionQuery, { a: actionId }, actionId);
  const a = q.data?.actions.action;
  useTitle(a ? `Action ${String(a.versions.at(-1)?.definition.name ?? actionId)}` : 'Action');

  const newest = a?.version ?? 1;
  const right = Number(params.get('to') ?? newest);
  const left = Number(params.get('from') ?? Math.max(1, right - 1));
  const byNumber = (n: number) => a?.versions.find((v) => v.version === n);
  const l = byNumber(left);
  const r = byNumber(right);
  const texts = useMemo(
    () =>
      l && r
        ? {
            def: [shown({ ...l.definition, source: null }), shown({ ...r.definition, source: null })] as const,
            source: l.definition.source || r.definition.source ? ([String(l.definition.source ?? ''), String(r.definition.source ?? '')] as const) : null,
          }
        : null,
    [l, r],
  );
  const changed = !!texts && (texts.def[0] !== texts.def[1] || (!!texts.source && texts.source[0] !== texts.source[1]));

  if (q.error && !q.data) return <Problem error={q.error} what="The action could not be read" />;
  if (!q.data) return <Loading what="the action" />;
  if (!a) return <p className="problem">There is no such action.</p>;
  const current = byNumber(a.version);
  const pick = (key: 'from' | 'to', v: string) => {
    const next = new URLSearchParams(params);
    next.set(key, v);
    setParams(next, { replace: true });
  };

  return (
    <>
      <div className="title-line">
        <h1>{current?.definition.name ?? a.id}</h1>
        <Status value={a.status} />
      </div>
      <p className="crumbs">
        <span className="mono">{a.id}</span> · kind {current?.definition.kind} · version {a.version} · changed <When iso={a.updatedAt} now={now} /> ·{' '}
        <Link to={paths.sessions(a.id)}>Sessions</Link>
      </p>

      <section aria-labelledby="versions">
        <h2 id="versions">Versions</h2>
        {a.versions.length === 1 && current ? (
          <p className="muted">
            One version so far ({stamp(current.createdAt)}
            {current.author ? ` by ${current.author}` : ''}, triggers from position {current.fromPosition}): nothing to compare. Its definition is below.
          </p>
        ) : (
          <Compare versions={a.versions} left={left} right={right} l={l} r={r} texts={texts} changed={changed} pick={pick} />
        )}
      </section>

      {current ? <DryRunPanel key={`${a.id}/${current.version}`} actionId={a.id} version={current.version} definition={current.definition} /> : null}

      {a.schedules.length > 0 ? (
        <section aria-labelledby="schedules">
          <h2 id="schedules">Schedules</h2>
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Trigger</th>
                  <th scope="col">Fires</th>
                  <th scope="col">Next</th>
                  <th scope="col">Last fired</th>
                  <th scope="col">Fired</th>
                  <th scope="col">Missed</th>
                </tr>
              </thead>
              <tbody>
                {a.schedules.map((x) => (
                  <tr key={x.trigger}>
                    <th scope="row">{x.trigger}</th>
                    <td className="mono">{x.every ? `every ${x.every}` : `${x.cron} (${x.timezone ?? 'UTC'})`}</td>
                    <td>
                      {!x.active
                        ? 'paused: the action is not active'
                        : x.nextFirings.length === 0
                          ? 'never again'
                          : x.nextFirings.map((t) => <div key={t}>{stamp(t)}</div>)}
                    </td>
                    <td>{x.lastFiredAt ? <When iso={x.lastFiredAt} now={now} /> : 'not yet'}</td>
                    <td>{x.fired}</td>
                    <td>{x.missed}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      ) : null}

      <section aria-labelledby="diag">
        <h2 id="diag">Trigger diagnostics</h2>
        {a.triggerDiagnostics.length === 0 ? (
          <p className="muted">No trigger predicate has failed on an event.</p>
        ) : (
          <div className="table-wrap">
            <table className="rows">
              <thead>
                <tr>
                  <th scope="col">Trigger</th>
                  <th scope="col">Version</th>
                  <th scope="col">Failures</th>
                  <th scope="col">Last message</th>
                  <th scope="col">Last event</th>
                </tr>
              </thead>
              <tbody>
                {a.triggerDiagnostics.map((d) => (
                  <tr key={`${d.version}/${d.trigger}`}>
                    <th scope="row">{d.trigger}</th>
                    <td data-label="Version">{d.version}</td>
                    <td data-label="Failures">{d.count}</td>
                    <td data-label="Last message">
                      {d.lastMessage}
                      <div className="small muted">
                        <When iso={d.lastAt} now={now} />
                      </div>
                    </td>
                    <td data-label="Last event">{d.lastEvent ? `${d.lastEvent.eventType} at position ${d.lastEvent.position}` : '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>

      <section aria-labelledby="intake">
        <h2 id="intake">Intake records</h2>
        {a.intakeRecords.nodes.length === 0 ? (
          <p className="muted">Every event that matched a trigger reached a session.</p>
        ) : (
          <div className="table-wrap">
            <table className="rows">
              <thead>
                <tr>
                  <th scope="col">Reason</th>
                  <th scope="col">When</th>
                  <th scope="col">Trigger</th>
                  <th scope="col">Session</th>
                  <th scope="col">Event</th>
                </tr>
              </thead>
              <tbody>
                {a.intakeRecords.nodes.map((x) => (
                  <tr key={x.id}>
                    <th scope="row">
                      <code>{x.reason}</code>
                      <div className="small">{x.message}</div>
                    </th>
                    <td data-label="When">
                      <When iso={x.createdAt} now={now} />
                    </td>
                    <td data-label="Trigger">
                      {x.trigger} (version {x.version})
                    </td>
                    <td data-label="Session">
                      {!x.sessionId ? '—' : x.reason === 'session_not_found' ? <span className="mono">{x.sessionId} (none)</span> : <Link to={paths.session(a.id, x.sessionId)}>{x.sessionId}</Link>}
                    </td>
                    <td data-label="Event">
                      {x.event.eventType} at position {x.event.position}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {a.intakeRecords.pageInfo.hasNextPage ? <p className="muted">The newest 50 are shown.</p> : null}
      </section>

      <details open={a.versions.length === 1 || undefined}>
        <summary>The current definition as JSON</summary>
        {current ? <Json value={current.definition} /> : null}
      </details>
    </>
  );
}

type Texts = { def: readonly [string, string]; source: readonly [string, string] | null } | null;

/** Two versions picked and compared: the definitions as JSON, then the sources. */
function Compare({
  versions,
  left,
  right,
  l,
  r,
  texts,
  changed,
  pick,
}: {
  versions: Version[];
  left: number;
  right: number;
  l?: Version;
  r?: Version;
  texts: Texts;
  changed: boolean;
  pick: (key: 'from' | 'to', v: string) => void;
}) {
  return (
    <>
          <form className="filters" onSubmit={(e) => e.preventDefault()}>
            <span className="field">
              <label htmlFor="v-from">Compare version</label>
              <select id="v-from" value={left} onChange={(e) => pick('from', e.target.value)}>
                {versions.map((v) => (
                  <option key={v.version} value={v.version}>
                    {v.version}
                  </option>
                ))}
              </select>
            </span>
            <span className="field">
              <label htmlFor="v-to">with version</label>
              <select id="v-to" value={right} onChange={(e) => pick('to', e.target.value)}>
                {versions.map((v) => (
                  <option key={v.version} value={v.version}>
                    {v.version}
                  </option>
                ))}
              </select>
            </span>
          </form>
          {l && r && l.version === r.version ? (
            <p className="muted">Version {l.version} on both sides: pick another version to compare it with.</p>
          ) : l && r ? (
            <>
              <p className="muted">
                Version {l.version}: {stamp(l.createdAt)}
                {l.author ? ` by ${l.author}` : ''}, triggers from position {l.fromPosition}. Version {r.version}: {stamp(r.createdAt)}
                {r.author ? ` by ${r.author}` : ''}, triggers from position {r.fromPosition}.
                {l.version !== r.version && !changed ? ' The definitions are the same.' : ''}
              </p>
              <Diff key={`d${l.version}/${r.version}`} a={texts!.def[0]} b={texts!.def[1]} left={l.version} right={r.version} what="" />
              {texts!.source ? (
                <>
                  <h3 className="diff-title">Source</h3>
                  <Diff key={`s${l.version}/${r.version}`} a={texts!.source[0]} b={texts!.source[1]} left={l.version} right={r.version} what="The source of " />
                </>
              ) : null}
            </>
          ) : (
            <p className="problem">No such version.</p>
          )}
    </>
  );
}

const sameRow = (x: Row) => x.left?.change === 'same' && x.right?.change === 'same';

/**
 * Two texts compared: side by side on a wide screen, in one column (each
 * unchanged line once) on a phone; runs of unchanged lines far from a
 * change are folded, each behind a button that shows it.
 */
function Diff({ a, b, left, right, what }: { a: string; b: string; left: number; right: number; what: string }) {
  const narrow = useMedia(narrowQuery);
  const [opened, setOpened] = useState<Set<string>>(() => new Set());
  const open = (k: string) => setOpened((o) => new Set(o).add(k));
  const folder = (n: number, k: string) => (
    <div role="row" className="diff-fold" key={`f${k}`}>
      <span role="cell">
        <button type="button" className="link" onClick={() => open(k)}>
          Show {n} unchanged {n === 1 ? 'line' : 'lines'}
        </button>
      </span>
    </div>
  );
  if (narrow) {
    const segs = fold(unified(a, b), (x) => x.change !== 'same');
    return (
      <div className="diff diff-unified" role="table" aria-label={`${what ? `${what}version` : 'Version'} ${left} changed into version ${right}`}>
        <div role="row" className="diff-head">
          <span role="columnheader">
            Version {left} → {right}: <span className="diff-removed-key">− only in {left}</span> <span className="diff-added-key">+ only in {right}</span>
          </span>
        </div>
        {segs.map((seg) =>
          'folded' in seg && !opened.has(`u${seg.from}`)
            ? folder(seg.folded.length, `u${seg.from}`)
            : ('folded' in seg ? seg.folded : seg.shown).map((x, i) => <UnifiedLine key={seg.from + i} line={x} />),
        )}
      </div>
    );
  }
  const segs = fold(sideBySide(a, b), (x) => !sameRow(x));
  return (
    <div className="diff" role="table" aria-label={`${what ? `${what}version` : 'Version'} ${left} and version ${right} side by side`}>
      <div role="row" className="diff-head">
        <span role="columnheader">Version {left}</span>
        <span role="columnheader">Version {right}</span>
      </div>
      {segs.map((seg) =>
        'folded' in seg && !opened.has(`s${seg.from}`)
          ? folder(seg.folded.length, `s${seg.from}`)
          : ('folded' in seg ? seg.folded : seg.shown).map((row, i) => (
              <div role="row" key={seg.from + i} className="diff-row">
                <DiffCell side={row.left} />
                <DiffCell side={row.right} />
              </div>
            )),
      )}
    </div>
  );
}

function UnifiedLine({ line }: { line: Line }) {
  const mark = line.change === 'added' ? '+' : line.change === 'removed' ? '−' : ' ';
  return (
    <div role="row" className={`diff-line diff-${line.change}`}>
      <span role="cell" className="diff-cell">
        <span className="ln" aria-hidden="true">
          {line.old ?? ''}
        </span>
        <span className="ln" aria-hidden="true">
          {line.new ?? ''}
        </span>
        <span className="mark" aria-label={line.change === 'same' ? undefined : line.change}>
          {mark}
        </span>
        <code>{line.text}</code>
      </span>
    </div>
  );
}

function DiffCell({ side }: { side?: { n: number; text: string; change: string } }) {
  if (!side) return <span role="cell" className="diff-cell diff-empty" />;
  const mark = side.change === 'added' ? '+' : side.change === 'removed' ? '−' : ' ';
  return (
    <span role="cell" className={`diff-cell diff-${side.change}`}>
      <span className="ln" aria-hidden="true">
        {side.n}
      </span>
      <span className="mark" aria-label={side.change === 'same' ? undefined : side.change}>
        {mark}
      </span>
      <code>{side.text}</code>
    </span>
  );
}

// ---------------------------------------------------------------- dry run

/** A finished dry run: the proposed definition's outcome, and the current one's over the same range (null: it failed). */
interface Outcome {
  proposed: DryRun;
  current: DryRun | null;
  version: number;
  limit: number | null;
}

/** A refused dry run: which of the two, and the server's errors. */
interface Failure {
  which: 'proposed' | 'current';
  error: APIError;
}

const countLabels: Record<TriggerCount, string> = {
  matched: 'Matched',
  started: 'Started',
  delivered: 'Delivered',
  intakeRecords: 'Intake records',
  executions: 'Executions',
};

const sessionsShown = 20;

/**
 * The Dry run panel: a proposed definition (prefilled with the current
 * one) judged over a range of the ledger, and the current definition over
 * the same range, their outcomes side by side. Nothing is stored. The
 * proposed one runs first; the current one then runs up to the position the
 * first ended at, so that both read the same events even while the ledger
 * grows.
 */
function DryRunPanel({ actionId, version, definition }: { actionId: string; version: number; definition: Record<string, unknown> }) {
  const { token, can, signOut } = useConsole();
  const initial = useMemo(() => pretty(definitionInput(definition)), [definition]);
  const [text, setText] = useState(initial);
  const [from, setFrom] = useState('1');
  const [to, setTo] = useState('');
  const [limit, setLimit] = useState('');
  const [defProblem, setDefProblem] = useState<string | null>(null);
  const [rangeProblems, setRangeProblems] = useState<FieldProblem[]>([]);
  const [running, setRunning] = useState<null | 'proposed' | 'current'>(null);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  const ctl = useRef<AbortController | null>(null);
  useEffect(() => () => ctl.current?.abort(), []);

  const run = async (e: FormEvent) => {
    e.preventDefault();
    const parsed = parseDefinition(text);
    const range = parseRange({ from, to, limit });
    setDefProblem(parsed.ok ? null : parsed.message);
    setRangeProblems(range.ok ? [] : range.problems);
    if (!parsed.ok || !range.ok) return;
    ctl.current?.abort();
    const c = new AbortController();
    ctl.current = c;
    setFailure(null);
    const current = definitionInput(definition);
    const vars = { a: actionId, from: range.range.from, to: range.range.to, limit: range.range.limit };
    const fail = (which: Failure['which'], err: unknown) => {
      if (c.signal.aborted) return true;
      if (unauthenticated(err)) signOut('The token was refused: it may have been revoked.');
      setFailure({ which, error: err instanceof APIError ? err : new APIError([{ message: String(err) }]) });
      return false;
    };
    let proposed: DryRun;
    try {
      setRunning('proposed');
      proposed = (await request<DryRunAnswer>(dryRunQuery, { ...vars, input: parsed.value }, token, c.signal)).actions.dryRun;
    } catch (err) {
      if (!fail('proposed', err)) {
        setOutcome(null); // not this definition's: it would read as the answer to what was sent
        setRunning(null);
      }
      return;
    }
    let now: DryRun | null = null;
    try {
      setRunning('current');
      // Up to where the proposed run's range ended: the same events, however the ledger grew meanwhile.
      now = (await request<DryRunAnswer>(dryRunQuery, { ...vars, to: proposed.to, input: current }, token, c.signal)).actions.dryRun;
    } catch (err) {
      if (fail('current', err)) return;
    }
    setOutcome({ proposed, current: now, version, limit: range.range.limit });
    setRunning(null);
  };

  const errorParts = new Set((failure?.which === 'proposed' ? failure.error.errors : []).map((x) => fieldPart(x.extensions?.field)));
  const rangeInvalid = (f: FieldProblem['field']) => rangeProblems.some((p) => p.field === f) || errorParts.has(f);
  const defInvalid = !!defProblem || errorParts.has('definition');
  const describe = (...ids: (string | false)[]) => ids.filter(Boolean).join(' ') || undefined;
  const rangeField = (id: 'from' | 'to' | 'limit', label: string, value: string, set: (v: string) => void, placeholder?: string) => (
    <span className="field">
      <label htmlFor={`dry-${id}`}>{label}</label>
      <input
        id={`dry-${id}`}
        inputMode="numeric"
        size={10}
        value={value}
        placeholder={placeholder}
        onChange={(e) => set(e.target.value)}
        aria-invalid={rangeInvalid(id) || undefined}
        aria-describedby={describe(rangeProblems.length > 0 && 'dry-range-problems', errorParts.has(id) && 'dry-failure')}
      />
    </span>
  );

  return (
    <section aria-labelledby="dryrun" className="dryrun">
      <h2 id="dryrun">Dry run</h2>
      <p className="muted" id="dry-help">
        What a proposed definition would have done over past events, as if its triggers had seen them live, beside what the current definition (version {version}) does over
        the same range. Nothing is stored and no turn runs.
        {!can.write(actionId) ? ' It needs WRITE on the action, which this token does not seem to have: the server may refuse it.' : ''}
      </p>
      <form onSubmit={run} aria-label="Dry run a proposed definition" noValidate>
        <label htmlFor="dry-def">Proposed definition (JSON, the ActionInput shape)</label>
        <textarea
          id="dry-def"
          className="code"
          rows={Math.min(22, Math.max(8, text.split('\n').length + 1))}
          value={text}
          onChange={(e) => setText(e.target.value)}
          spellCheck={false}
          autoCapitalize="off"
          autoComplete="off"
          aria-invalid={defInvalid || undefined}
          aria-describedby={describe('dry-help', !!defProblem && 'dry-def-problem', errorParts.has('definition') && 'dry-failure')}
        />
        {defProblem ? (
          <p className="problem" id="dry-def-problem" role="alert">
            {defProblem} Nothing was sent.
          </p>
        ) : null}
        <div className="filters">
          {rangeField('from', 'From position', from, setFrom)}
          {rangeField('to', 'To position', to, setTo, 'ledger head')}
          {rangeField('limit', 'Limit', limit, setLimit, '100000')}
        </div>
        <p className="muted small" id="dry-range-help">
          To position empty: up to the ledger head. Limit: the most events read (1 to 500,000; default 100,000).
        </p>
        {rangeProblems.length > 0 ? (
          <ul className="problems" id="dry-range-problems" role="alert" aria-label="Problems with the range">
            {rangeProblems.map((p) => (
              <li key={p.field}>{p.message}</li>
            ))}
          </ul>
        ) : null}
        <div className="buttons">
          <button type="submit" className="primary" disabled={!!running}>
            Run
          </button>
          <button
            type="button"
            disabled={!!running || text === initial}
            onClick={() => {
              setText(initial);
              setDefProblem(null);
            }}
          >
            Reset to the current definition
          </button>
        </div>
      </form>
      {running ? <Loading what={running === 'proposed' ? 'the dry run of the proposed definition' : `the dry run of the current definition (version ${version})`} /> : null}
      {failure ? <DryRunFailure failure={failure} version={version} /> : null}
      {outcome ? <DryRunOutcome outcome={outcome} actionId={actionId} /> : null}
    </section>
  );
}

/** Each error of a refused dry run: its message, code and field. */
function DryRunFailure({ failure, version }: { failure: Failure; version: number }) {
  const { which, error } = failure;
  // FORBIDDEN on the query itself (not on a part of a definition, such as a permission it declares): no WRITE on the action.
  const forbidden = error.errors.some((x) => x.extensions?.code === 'FORBIDDEN' && fieldPart(x.extensions?.field) === null);
  return (
    <div className="problem" role="alert" id="dry-failure">
      <p className="problem-head">
        {which === 'current'
          ? `The dry run of the current definition (version ${version}) was refused`
          : forbidden
            ? 'The dry run was refused'
            : 'The dry run of the proposed definition was refused'}
        {which === 'current' ? '; the proposed one ran and is shown alone' : ''}:
      </p>
      <ul>
        {error.errors.map((x, i) => {
          const field = fieldName(x.extensions?.field);
          const code = x.extensions?.code;
          // The server's message often starts with the field: it is said once, up front.
          const message = field && x.message.startsWith(`${field}: `) ? x.message.slice(field.length + 2) : x.message;
          return (
            <li key={i}>
              {field ? (
                <>
                  <code>{field}</code>
                  {fieldPart(x.extensions?.field) === 'definition' ? ` (in the ${which} definition)` : ''}:{' '}
                </>
              ) : null}
              {message} {code && code !== 'NETWORK' ? <code>{code}</code> : null}
            </li>
          );
        })}
      </ul>
      {forbidden ? <p>A dry run needs WRITE on the action.</p> : null}
    </div>
  );
}

/** A number and, when it differs from the one compared with, by how much ("+3", "−2"). */
function Delta({ value, than }: { value: number; than: number | null }) {
  if (than === null || than === value) return <>{value}</>;
  const d = value - than;
  return (
    <>
      {value} <span className="delta">({d > 0 ? `+${d}` : `−${-d}`})</span>
    </>
  );
}

/**
 * Two cells, current then proposed, marked when they differ (colour and the
 * proposed cell's delta). alone: the current run was refused, nothing to compare.
 */
function Pair({ current, proposed, alone = false }: { current: number | null; proposed: number | null; alone?: boolean }) {
  const differ = !alone && current !== proposed;
  const cls = differ ? 'differs' : undefined;
  return (
    <>
      <td className={differ ? 'pair-first differs' : 'pair-first'}>{current ?? '—'}</td>
      <td className={cls}>{proposed === null ? '—' : <Delta value={proposed} than={current} />}</td>
    </>
  );
}

/** A table of counts by name, current beside proposed. */
function Counts({ label, head, rows, proposedOnly }: { label: string; head: string; rows: { name: ReactNode; key: string; current: number | null; proposed: number }[]; proposedOnly: boolean }) {
  return (
    <div className="table-wrap">
      <table className="compare" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">{head}</th>
            <th scope="col">Current{proposedOnly ? ' (refused)' : ''}</th>
            <th scope="col">Proposed</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.key}>
              <th scope="row">{r.name}</th>
              <Pair current={r.current} proposed={r.proposed} alone={proposedOnly} />
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function DryRunOutcome({ outcome, actionId }: { outcome: Outcome; actionId: string }) {
  const { proposed, current, version, limit } = outcome;
  const [allSessions, setAllSessions] = useState(false);
  const triggers = compareTriggers(current, proposed);
  const intake = compareIntake(current, proposed);
  const failures = (r: DryRun) => r.diagnostics.reduce((n, d) => n + d.count, 0);
  const intakeTotal = (r: DryRun) => r.intakeCounts.reduce((n, x) => n + x.count, 0);
  const short = shortOf(proposed, limit);
  const sessions = allSessions ? proposed.sessions : proposed.sessions.slice(0, sessionsShown);
  const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
  const tally = (r: DryRun) =>
    [
      plural(r.sessionCount, 'session', 'sessions'),
      ...(r.executions || proposed.executions || current?.executions ? [plural(r.executions, 'execution', 'executions')] : []),
      plural(intakeTotal(r), 'intake record', 'intake records'),
      plural(failures(r), 'predicate failure', 'predicate failures'),
    ].join(', ');
  const diff = (a: number | null, b: number) => (a === null ? '' : a === b ? ' (the same)' : ` (${b > a ? '+' : '−'}${Math.abs(b - a)})`);

  return (
    <section className="dry-outcome" aria-labelledby="dry-outcome">
      <h3 id="dry-outcome">Outcome: positions {proposed.from} to {proposed.to}</h3>
      <p>
        Proposed: {tally(proposed)}. {current ? `Current (version ${version}): ${tally(current)}.` : `Current (version ${version}): refused, see above.`}{' '}
        {current ? <span className="muted">Cells that differ are marked, the proposed one with its difference in brackets.</span> : null}
      </p>
      {short ? <p className="warn-note">{short}</p> : null}

      <h4 id="dry-triggers">Per trigger</h4>
      {/* Focusable: on a phone the table scrolls sideways, and a keyboard can scroll it. */}
      <div className="table-wrap" tabIndex={0} role="group" aria-labelledby="dry-triggers">
        <table className="compare" aria-labelledby="dry-triggers">
          <colgroup />
          {triggerCounts.map((c) => (
            <colgroup key={c} span={2} />
          ))}
          <thead>
            <tr>
              <th scope="col" rowSpan={2}>
                Trigger
              </th>
              {triggerCounts.map((c) => (
                <th scope="colgroup" colSpan={2} key={c} className="group">
                  {countLabels[c]}
                </th>
              ))}
            </tr>
            <tr>
              {triggerCounts.map((c) => (
                <FragmentPair key={c} />
              ))}
            </tr>
          </thead>
          <tbody>
            {triggers.map((t) => (
              <tr key={t.trigger}>
                <th scope="row">
                  {t.trigger}
                  {!t.current && current ? <span className="tag">new</span> : null}
                  {!t.proposed ? <span className="tag">dropped</span> : null}
                </th>
                {triggerCounts.map((c) => (
                  <Pair key={c} current={t.current ? t.current[c] : null} proposed={t.proposed ? t.proposed[c] : null} alone={!current} />
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {triggers.length === 0 ? <p className="muted">Neither definition has a trigger.</p> : null}

      <h4 id="dry-sessions">Sessions it would start</h4>
      <p>
        Current: {current ? current.sessionCount : '—'}. Proposed: {proposed.sessionCount}
        {diff(current?.sessionCount ?? null, proposed.sessionCount)}.
      </p>
      {proposed.sessions.length > 0 ? (
        <>
          <p className="muted small">
            The proposed definition's {proposed.sessionCount > proposed.sessions.length ? `first ${proposed.sessions.length}` : 'sessions'}, in start order
            {sessions.length < proposed.sessions.length ? ` (${sessions.length} shown)` : ''}:
          </p>
          <div className="table-wrap">
            <table className="rows" aria-label="Sessions the proposed definition would start">
              <thead>
                <tr>
                  <th scope="col">Session</th>
                  <th scope="col">Started at</th>
                  <th scope="col">Inputs</th>
                  <th scope="col">Started by</th>
                  <th scope="col">Input</th>
                </tr>
              </thead>
              <tbody>
                {sessions.map((s) => (
                  <tr key={s.id}>
                    <th scope="row" className="mono">
                      {s.id}
                    </th>
                    <td data-label="Started at">{stamp(s.startedAt)}</td>
                    <td data-label="Inputs">{s.inputs}</td>
                    <td data-label="Started by">{s.origin ? `${s.origin.eventType} at position ${s.origin.position}` : '—'}</td>
                    <td data-label="Input">
                      <code className="mono">{JSON.stringify(s.input)}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {sessions.length < proposed.sessions.length ? (
            <button type="button" onClick={() => setAllSessions(true)}>
              Show all {proposed.sessions.length}
            </button>
          ) : null}
        </>
      ) : null}

      <h4 id="dry-intake">Intake records by reason</h4>
      {intake.length === 0 ? (
        <p className="muted">Neither definition would leave an intake record: every event that matched would reach a session.</p>
      ) : (
        <Counts
          label="Intake records by reason"
          head="Reason"
          proposedOnly={!current}
          rows={intake.map((x) => ({ key: x.reason, name: <code>{x.reason}</code>, current: x.current, proposed: x.proposed }))}
        />
      )}
      {proposed.intakeRecords.length > 0 ? (
        <details>
          <summary>The proposed definition's first intake records ({proposed.intakeRecords.length})</summary>
          <div className="table-wrap">
            <table className="rows" aria-label="Intake records the proposed definition would leave">
              <thead>
                <tr>
                  <th scope="col">Reason</th>
                  <th scope="col">Trigger</th>
                  <th scope="col">Session</th>
                  <th scope="col">Event</th>
                </tr>
              </thead>
              <tbody>
                {proposed.intakeRecords.map((x, i) => (
                  <tr key={i}>
                    <th scope="row">
                      <code>{x.reason}</code>
                      <div className="small">{x.message}</div>
                    </th>
                    <td data-label="Trigger">{x.trigger}</td>
                    <td data-label="Session">
                      {!x.sessionId ? '—' : x.reason === 'session_not_found' ? <span className="mono">{x.sessionId} (none)</span> : <Link to={paths.session(actionId, x.sessionId)}>{x.sessionId}</Link>}
                    </td>
                    <td data-label="Event">{x.event ? `${x.event.eventType} at position ${x.event.position}` : '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </details>
      ) : null}

      <h4 id="dry-diag">Diagnostics of the proposed definition</h4>
      {proposed.diagnostics.length === 0 ? (
        <p className="muted">
          No predicate of the proposed definition failed on an event{current && failures(current) ? ` (the current one's failed ${failures(current) === 1 ? 'once' : `${failures(current)} times`})` : ''}.
        </p>
      ) : (
        <div className="table-wrap">
          <table className="rows" aria-labelledby="dry-diag">
            <thead>
              <tr>
                <th scope="col">Trigger</th>
                <th scope="col">Failures</th>
                <th scope="col">Last message</th>
              </tr>
            </thead>
            <tbody>
              {proposed.diagnostics.map((d) => (
                <tr key={d.trigger}>
                  <th scope="row">{d.trigger}</th>
                  <td data-label="Failures">{d.count}</td>
                  <td data-label="Last message">{d.lastMessage}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      <h4 id="dry-read">What was read</h4>
      <div className="table-wrap">
        <table className="compare" aria-labelledby="dry-read">
          <thead>
            <tr>
              <th scope="col">What</th>
              <th scope="col">Current{current ? '' : ' (refused)'}</th>
              <th scope="col">Proposed</th>
            </tr>
          </thead>
          <tbody>
            <tr>
              <th scope="row">Events read</th>
              <Pair current={current?.events ?? null} proposed={proposed.events} alone={!current} />
            </tr>
            <tr>
              <th scope="row">Whole range read</th>
              {[current, proposed].map((r, i) => (
                <td key={i} className={current && current.complete !== proposed.complete ? 'differs' : undefined}>
                  {!r ? '—' : r.complete ? 'yes' : `no: stopped at position ${r.reached}`}
                </td>
              ))}
            </tr>
            <tr>
              <th scope="row">Sessions it would start</th>
              <Pair current={current?.sessionCount ?? null} proposed={proposed.sessionCount} alone={!current} />
            </tr>
            <tr>
              <th scope="row">Executions</th>
              <Pair current={current?.executions ?? null} proposed={proposed.executions} alone={!current} />
            </tr>
            <tr>
              <th scope="row">Intake records</th>
              <Pair current={current ? intakeTotal(current) : null} proposed={intakeTotal(proposed)} alone={!current} />
            </tr>
            <tr>
              <th scope="row">Predicate failures</th>
              <Pair current={current ? failures(current) : null} proposed={failures(proposed)} alone={!current} />
            </tr>
            <tr>
              <th scope="row">Took</th>
              <td>{current ? `${current.tookMs} ms` : '—'}</td>
              <td>{proposed.tookMs} ms</td>
            </tr>
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** The Current and Proposed column heads under one count's head. */
function FragmentPair() {
  return (
    <>
      <th scope="col" className="pair-first">
        Current
      </th>
      <th scope="col">Proposed</th>
    </>
  );
}
