// One action: its definition, its versions side by side as a diff, the
// trigger diagnostics (predicates that failed on events) and the intake
// records (events that matched but could not start or resume a session).
import { useMemo, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';

import { fold, sideBySide, unified, type Line, type Row } from '../diff';
import { pretty, stamp } from '../format';
import { narrowQuery, useMedia, useNow, useQuery, useTitle } from '../hooks';
import { paths } from '../links';
import { Json, Loading, Problem, Status, When } from '../ui';

const definitionFields = `name kind config source
  triggers { name event schedule { cron timezone every } session { start { input } resume { id } } }
  session { inputSchema id ends schedule { name cron timezone every } turns { on maxInputs maxBytes window } }
  tool { name description inputSchema approval session { start { input } } }
  permissions { read write tools sessions }`;

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
