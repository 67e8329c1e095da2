// The sessions of one action, newest first, filtered by status, with each
// open session's status kept live by its own sessionUpdates (up to 50 on
// the page); the list is read again when one changes, and every 15 s for
// new sessions.
import { useCallback, useEffect, useRef } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';

import { actionsQuery } from '../actionlist';
import { useNow, useQuery, useSubscription, useTitle } from '../hooks';
import { paths } from '../links';
import { useConsole } from '../session';
import { Loading, Problem, Status, When } from '../ui';

const statuses = ['', 'OPEN', 'WAITING', 'COMPLETED', 'FAILED', 'CANCELLED'];

const listQuery = `query Sessions($a: UUID!, $status: SessionStatus, $after: String) { actions { action(id: $a) {
  id definition { name }
  sessions(first: 50, status: $status, after: $after) { pageInfo { hasNextPage endCursor }
    nodes { id version status reason running startedAt updatedAt endsAt } } } } }`;

interface Row {
  id: string;
  version: number;
  status: string;
  reason: string | null;
  running: boolean;
  startedAt: string;
  updatedAt: string;
  endsAt: string | null;
}

interface Answer {
  actions: { action: null | { id: string; definition: { name: string }; sessions: { pageInfo: { hasNextPage: boolean; endCursor: string | null }; nodes: Row[] } } };
}

const final = (status: string) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(status);

const rowSub = `subscription SessionRow($a: UUID!, $s: String!) { sessionUpdates(actionId: $a, id: $s) { kind session { status running } } }`;

export function SessionsScreen() {
  const { actionId } = useParams();
  const [params, setParams] = useSearchParams();
  const status = params.get('status') ?? '';
  const { viewer } = useConsole();
  const navigate = useNavigate();
  useTitle('Sessions');
  const now = useNow(10_000);

  const aq = actionsQuery(viewer);
  const actions = useQuery<unknown>(aq.query, aq.vars, aq.query, aq.query === '');
  const actionRows = actions.data ? aq.rows(actions.data) : [];

  // Without an action in the address, the first one readable.
  useEffect(() => {
    if (!actionId && actionRows.length > 0) navigate(paths.sessions(actionRows[0].id), { replace: true });
  }, [actionId, actionRows, navigate]);

  const q = useQuery<Answer>(listQuery, { a: actionId, status: status || null }, `${actionId}/${status}`, !actionId);
  const refetch = q.refetch;
  useEffect(() => {
    const t = setInterval(() => document.visibilityState === 'visible' && refetch(), 15_000);
    return () => clearInterval(t);
  }, [refetch]);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const soon = useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(refetch, 500);
  }, [refetch]);
  useEffect(() => () => clearTimeout(timer.current), []);

  const action = q.data?.actions.action;
  const rows = action?.sessions.nodes ?? [];
  return (
    <>
      <div className="screen-head">
        <h1>Sessions{action ? <> of {action.definition.name}</> : null}</h1>
        <form className="filters" onSubmit={(e) => e.preventDefault()}>
          <span className="field">
            <label htmlFor="s-action">Action</label>
            <select id="s-action" value={actionId ?? ''} onChange={(e) => navigate(paths.sessions(e.target.value, status || undefined))}>
              {!actionId ? <option value="">Choose…</option> : null}
              {actionRows.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.definition.name}
                </option>
              ))}
              {actionId && !actionRows.some((a) => a.id === actionId) ? <option value={actionId}>{action?.definition.name ?? actionId}</option> : null}
            </select>
          </span>
          <span className="field">
            <label htmlFor="s-status">Status</label>
            <select id="s-status" value={status} onChange={(e) => setParams(e.target.value ? { status: e.target.value } : {})}>
              {statuses.map((s) => (
                <option key={s} value={s}>
                  {s || 'Any'}
                </option>
              ))}
            </select>
          </span>
        </form>
      </div>
      <Problem error={actions.error} what="The actions could not be read" />
      <Problem error={q.error} what="The sessions could not be read" />
      {!actionId && aq.query === '' ? <p className="empty">This token may read no action.</p> : null}
      {actionId && !q.data && !q.error ? <Loading what="the sessions" /> : null}
      {q.data && !action ? <p className="problem">There is no such action.</p> : null}
      {action && rows.length === 0 ? <p className="empty">No session{status ? ` is ${status}` : ' yet'}.</p> : null}
      {action && rows.length > 0 ? (
        <div className="table-wrap">
          <table className="rows">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Status</th>
                <th scope="col">Version</th>
                <th scope="col">Started</th>
                <th scope="col">Last change</th>
                <th scope="col">Ends</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r, i) => (
                <SessionRow key={r.id} r={r} actionId={action.id} now={now} follow={i < 50} onChange={soon} />
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {action?.sessions.pageInfo.hasNextPage ? <p className="muted">The newest 50 are shown; filter by status to find others.</p> : null}
    </>
  );
}

function SessionRow({ r, actionId, now, follow, onChange }: { r: Row; actionId: string; now: number; follow: boolean; onChange: () => void }) {
  const live = follow && !final(r.status);
  const seen = useRef(`${r.status}/${r.running}`);
  seen.current = `${r.status}/${r.running}`;
  useSubscription<{ sessionUpdates: { session: { status: string; running: boolean } } }>(rowSub, { a: actionId, s: r.id }, `${actionId}/${r.id}`, (d) => {
    const s = d.sessionUpdates.session;
    if (`${s.status}/${s.running}` !== seen.current) onChange();
  }, live);
  return (
    <tr>
      <th scope="row">
        <Link to={paths.session(actionId, r.id)} className="mono">
          {r.id}
        </Link>
      </th>
      <td data-label="Status">
        <Status value={r.status} running={r.running} />
        {r.reason ? <div className="small muted">{r.reason}</div> : null}
      </td>
      <td data-label="Version">{r.version}</td>
      <td data-label="Started">
        <When iso={r.startedAt} now={now} />
      </td>
      <td data-label="Last change">
        <When iso={r.updatedAt} now={now} />
      </td>
      <td data-label="Ends">{final(r.status) ? '— (ended)' : r.endsAt ? <When iso={r.endsAt} now={now} /> : 'no end'}</td>
    </tr>
  );
}
