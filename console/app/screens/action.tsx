// One action: its definition, its versions side by side as a diff, the
// trigger diagnostics (predicates that failed on events) and the intake
// records (events that matched but could not start or resume a session).
import { useMemo } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';

import { sideBySide } from '../diff';
import { pretty, stamp } from '../format';
import { useNow, useQuery, useTitle } from '../hooks';
import { paths } from '../links';
import { useConsole } from '../session';
import { Json, Loading, Problem, Status, When } from '../ui';

const definitionFields = `name kind config source
  triggers { name event session { start { input } resume { id } } }
  session { inputSchema id ends schedule { name cron timezone every } turns { on maxInputs maxBytes window } }
  tool { name description inputSchema approval session { start { input } } }
  permissions { read write tools sessions }`;

const actionQuery = `query Action($a: UUID!) { actions { action(id: $a) {
  id status version createdAt updatedAt
  versions { version createdAt author fromPosition definition { ${definitionFields} } }
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

interface Answer {
  actions: {
    action: null | {
      id: string;
      status: string;
      version: number;
      createdAt: string;
      updatedAt: string;
      versions: Version[];
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
  const { can } = useConsole();
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
  const rows = useMemo(() => (l && r ? sideBySide(shown({ ...l.definition, source: null }), shown({ ...r.definition, source: null })) : []), [l, r]);
  const sourceRows = useMemo(
    () => (l && r && (l.definition.source || r.definition.source) ? sideBySide(String(l.definition.source ?? ''), String(r.definition.source ?? '')) : []),
    [l, r],
  );
  const changed = [...rows, ...sourceRows].some((x) => x.left?.change !== 'same' || x.right?.change !== 'same');

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
        {can.readLedger ? null : null}
      </p>

      <section aria-labelledby="versions">
        <h2 id="versions">Versions</h2>
        <form className="filters" onSubmit={(e) => e.preventDefault()}>
          <label htmlFor="v-from">Compare version</label>
          <select id="v-from" value={left} onChange={(e) => pick('from', e.target.value)}>
            {a.versions.map((v) => (
              <option key={v.version} value={v.version}>
                {v.version}
              </option>
            ))}
          </select>
          <label htmlFor="v-to">with version</label>
          <select id="v-to" value={right} onChange={(e) => pick('to', e.target.value)}>
            {a.versions.map((v) => (
              <option key={v.version} value={v.version}>
                {v.version}
              </option>
            ))}
          </select>
        </form>
        {l && r ? (
          <>
            <p className="muted">
              Version {l.version}: {stamp(l.createdAt)}
              {l.author ? ` by ${l.author}` : ''}, triggers from position {l.fromPosition}. Version {r.version}: {stamp(r.createdAt)}
              {r.author ? ` by ${r.author}` : ''}, triggers from position {r.fromPosition}.
              {l.version !== r.version && !changed ? ' The definitions are the same.' : ''}
            </p>
            <div className="diff" role="table" aria-label={`Version ${l.version} and version ${r.version} side by side`}>
              <div role="row" className="diff-head">
                <span role="columnheader">Version {l.version}</span>
                <span role="columnheader">Version {r.version}</span>
              </div>
              {rows.map((row, i) => (
                <div role="row" key={i} className="diff-row">
                  <DiffCell side={row.left} />
                  <DiffCell side={row.right} />
                </div>
              ))}
            </div>
            {sourceRows.length ? (
              <>
                <h3 className="diff-title">Source</h3>
                <div className="diff" role="table" aria-label={`The source of version ${l.version} and version ${r.version} side by side`}>
                  <div role="row" className="diff-head">
                    <span role="columnheader">Version {l.version}</span>
                    <span role="columnheader">Version {r.version}</span>
                  </div>
                  {sourceRows.map((row, i) => (
                    <div role="row" key={i} className="diff-row">
                      <DiffCell side={row.left} />
                      <DiffCell side={row.right} />
                    </div>
                  ))}
                </div>
              </>
            ) : null}
          </>
        ) : (
          <p className="problem">No such version.</p>
        )}
      </section>

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
                    <td>{d.version}</td>
                    <td>{d.count}</td>
                    <td>
                      {d.lastMessage}
                      <div className="small muted">
                        <When iso={d.lastAt} now={now} />
                      </div>
                    </td>
                    <td>{d.lastEvent ? `${d.lastEvent.eventType} @ ${d.lastEvent.position}` : '—'}</td>
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
                  <th scope="col">When</th>
                  <th scope="col">Reason</th>
                  <th scope="col">Trigger</th>
                  <th scope="col">Session</th>
                  <th scope="col">Event</th>
                </tr>
              </thead>
              <tbody>
                {a.intakeRecords.nodes.map((x) => (
                  <tr key={x.id}>
                    <td>
                      <When iso={x.createdAt} now={now} />
                    </td>
                    <th scope="row">
                      <code>{x.reason}</code>
                      <div className="small">{x.message}</div>
                    </th>
                    <td>
                      {x.trigger} (v{x.version})
                    </td>
                    <td>{x.sessionId ? <Link to={paths.session(a.id, x.sessionId)}>{x.sessionId}</Link> : '—'}</td>
                    <td>
                      {x.event.eventType} @ {x.event.position}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {a.intakeRecords.pageInfo.hasNextPage ? <p className="muted">The newest 50 are shown.</p> : null}
      </section>

      <details>
        <summary>The current definition as JSON</summary>
        {current ? <Json value={current.definition} /> : null}
      </details>
    </>
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
