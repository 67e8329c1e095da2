// The ledger (issue 13): the newest events, then each new one as it
// commits (ledgerEvents from the newest position read), optionally of one
// type, each linked to the sessions it reached.
import { useCallback, useRef, useState, type FormEvent } from 'react';
import { Link, useSearchParams } from 'react-router';

import { request, type APIError } from '../api';
import { stamp } from '../format';
import { useQuery, useSubscription, useTitle } from '../hooks';
import { paths } from '../links';
import { useConsole } from '../session';
import { Json, Loading, Problem } from '../ui';

const eventFields = `id eventType position commitTime data sessions { id status action { id definition { name } } }`;

const recentQuery = `query Recent($type: String, $before: String) { ledger { recentEvents(last: 100, type: $type, before: $before) {
  pageInfo { hasNextPage endCursor } nodes { ${eventFields} } } } }`;

const liveSub = `subscription Events($after: String, $type: String) { ledgerEvents(after: $after, type: $type) { ${eventFields} } }`;

interface Ev {
  id: string;
  eventType: string;
  position: string;
  commitTime: string;
  data: unknown;
  sessions: { id: string; status: string; action: { id: string; definition: { name: string } } }[];
}

interface Page {
  ledger: { recentEvents: { pageInfo: { hasNextPage: boolean; endCursor: string | null }; nodes: Ev[] } };
}

const MAX = 1000;

export function LedgerScreen() {
  useTitle('Ledger');
  const { can, token } = useConsole();
  const [params, setParams] = useSearchParams();
  const type = params.get('type') ?? '';
  const [draft, setDraft] = useState(type);
  const q = useQuery<Page>(recentQuery, { type: type || null }, `recent:${type}`, !can.readLedger);
  const [newer, setNewer] = useState<{ key: string; list: Ev[] }>({ key: '', list: [] });
  const [older, setOlder] = useState<{ key: string; list: Ev[]; more: boolean; cursor: string | null } | null>(null);
  const [olderError, setOlderError] = useState<APIError | null>(null);
  const key = `recent:${type}`;

  const page = q.data?.ledger.recentEvents;
  const head = page ? (page.nodes[0]?.position ?? '0') : null;
  const seen = useRef(new Set<string>());

  const subError = useSubscription<{ ledgerEvents: Ev }>(
    liveSub,
    { after: head, type: type || null },
    `${key}@${head}`,
    (d) => {
      const ev = d.ledgerEvents;
      setNewer((n) => {
        const list = n.key === `${key}@${head}` ? n.list : [];
        if (list.some((x) => x.position === ev.position)) return n;
        return { key: `${key}@${head}`, list: [ev, ...list].slice(0, MAX) };
      });
    },
    can.readLedger && head !== null,
  );

  const loadOlder = useCallback(async () => {
    const cursor = older && older.key === key ? older.cursor : (page?.pageInfo.endCursor ?? null);
    try {
      const d = await request<Page>(recentQuery, { type: type || null, before: cursor }, token);
      const p = d.ledger.recentEvents;
      setOlder((o) => ({ key, list: [...(o && o.key === key ? o.list : []), ...p.nodes], more: p.pageInfo.hasNextPage, cursor: p.pageInfo.endCursor }));
      setOlderError(null);
    } catch (err) {
      setOlderError(err as APIError);
    }
  }, [older, key, page, type, token]);

  if (!can.readLedger) {
    return (
      <>
        <h1>Ledger</h1>
        <p className="empty">This token may not read the ledger (it needs READ on ledger).</p>
      </>
    );
  }

  seen.current = new Set();
  const live = newer.key === `${key}@${head}` ? newer.list : [];
  const events = [...live, ...(page?.nodes ?? []), ...(older && older.key === key ? older.list : [])].filter((e) => {
    if (seen.current.has(e.position)) return false;
    seen.current.add(e.position);
    return true;
  });
  const more = older && older.key === key ? older.more : page?.pageInfo.hasNextPage;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setParams(draft.trim() ? { type: draft.trim() } : {});
  };

  return (
    <>
      <div className="screen-head">
        <h1>Ledger</h1>
        <form className="filters" onSubmit={submit} role="search">
          <label htmlFor="l-type">Event type</label>
          <input id="l-type" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="e.g. entry.inserted" list="l-types" />
          <datalist id="l-types">
            {[...new Set(events.map((e) => e.eventType))].map((t) => (
              <option key={t} value={t} />
            ))}
          </datalist>
          <button type="submit">Filter</button>
          {type ? (
            <button
              type="button"
              onClick={() => {
                setDraft('');
                setParams({});
              }}
            >
              All types
            </button>
          ) : null}
        </form>
      </div>
      <p className="muted">Newest first; new events appear at the top as they commit.</p>
      <Problem error={q.error} what="The ledger could not be read" />
      <Problem error={subError} what="Live updates stopped" />
      {!q.data && !q.error ? <Loading what="the ledger" /> : null}
      {q.data && events.length === 0 ? <p className="empty">No event{type ? ` of type ${type}` : ''} yet.</p> : null}
      {events.length > 0 ? (
        <ol className="events" aria-label="Events, newest first">
          {events.map((e) => (
            <li key={e.position} data-position={e.position}>
              <div className="item-head">
                <span className="mono pos" title="Position">
                  #{e.position}
                </span>
                <button type="button" className="link type" onClick={() => { setDraft(e.eventType); setParams({ type: e.eventType }); }} aria-label={`Show only ${e.eventType} events`}>
                  {e.eventType}
                </button>
                <time dateTime={e.commitTime} className="muted small">
                  {stamp(e.commitTime)}
                </time>
              </div>
              {e.sessions.length ? (
                <p className="reached">
                  Reached{' '}
                  {e.sessions.map((s, i) => (
                    <span key={`${s.action.id}/${s.id}`}>
                      {i ? ', ' : ''}
                      <Link to={paths.session(s.action.id, s.id)}>
                        {s.action.definition.name} / {s.id}
                      </Link>
                    </span>
                  ))}
                </p>
              ) : (
                <p className="reached muted">Reached no session.</p>
              )}
              <details>
                <summary>Data</summary>
                <Json value={e.data} />
              </details>
            </li>
          ))}
        </ol>
      ) : null}
      <Problem error={olderError} what="Older events could not be read" />
      {more ? (
        <button type="button" onClick={loadOlder}>
          Older events
        </button>
      ) : null}
    </>
  );
}
