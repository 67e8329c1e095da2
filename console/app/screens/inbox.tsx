// The inbox (issue 13), the responder's landing page: every approval
// request and held turn waiting, across the sessions the token may read,
// oldest first, kept live by inboxUpdates. A row answered here or
// elsewhere leaves with a notice, never an error page.
import { useCallback, useEffect, useRef, useState } from 'react';
import { Link, useSearchParams } from 'react-router';

import { request, type APIError } from '../api';
import { AnswerForm, type Answered } from '../answer';
import { stamp, waitingFor } from '../format';
import { useNow, useSubscription, useTitle } from '../hooks';
import { paths } from '../links';
import { inboxQuery, inboxSub, type InboxItem, type InboxPage, type InboxUpdate } from '../queries';
import { useConsole } from '../session';
import { Loading, Problem, useNotify, Value } from '../ui';

const kinds = [
  ['', 'Everything'],
  ['APPROVAL', 'Approvals'],
  ['HOLD', 'Held turns'],
] as const;

const verb: Record<Answered['decision'], string> = {
  APPROVE: 'Approved',
  DENY: 'Denied',
  RETRY: 'Retry sent for',
  SKIP: 'Skipped',
};

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

function what(item: InboxItem): string {
  return item.kind === 'APPROVAL' ? `the call of ${item.approval?.tool ?? 'a tool'}` : `the hold of turn ${item.hold?.turn ?? '?'}`;
}

export function InboxScreen() {
  useTitle('Inbox');
  const { token } = useConsole();
  const notify = useNotify();
  const [params, setParams] = useSearchParams();
  const kind = params.get('kind') ?? '';
  const [items, setItems] = useState<InboxItem[] | null>(null);
  const [error, setError] = useState<APIError | null>(null);
  const [total, setTotal] = useState(0);
  const [more, setMore] = useState(false);
  const gone = useRef(new Set<string>()); // answered or closed: never shown again
  const heading = useRef<HTMLHeadingElement>(null);
  const now = useNow(5000);
  const loadSeq = useRef(0);

  const fresh = useRef(new Set<string>()); // raised since the last read began
  const sending = useRef(new Set<string>()); // answered from this tab, answer on its way
  const shownRef = useRef<InboxItem[] | null>(null); // the rows as last rendered
  shownRef.current = items;

  const load = useCallback(async () => {
    const seq = ++loadSeq.current;
    fresh.current = new Set();
    try {
      const d = await request<InboxPage>(inboxQuery, { kind: kind || null }, token);
      if (seq !== loadSeq.current) return;
      const page = d.actions.inbox;
      // Rows on screen that the new read no longer has went away while the
      // live feed was down (or before it caught up): say so, as the feed would.
      // (With more pages, only rows within the page read can be judged.)
      const still = new Set(page.nodes.map((n) => n.interruptId));
      const upTo = page.pageInfo.hasNextPage ? (page.nodes.at(-1)?.raisedAt ?? '') : null;
      for (const x of shownRef.current ?? []) {
        if (still.has(x.interruptId) || fresh.current.has(x.interruptId) || gone.current.has(x.interruptId)) continue;
        if (upTo !== null && x.raisedAt > upTo) continue;
        gone.current.add(x.interruptId);
        notify(
          <>
            {cap(what(x))} in session {x.session.id} no longer waits (the session closed or went on).{' '}
            <Link to={paths.session(x.action.id, x.session.id)}>Open the session</Link>
          </>,
          'warn',
        );
      }
      setItems((have) => {
        // The page is the inbox as it was read; rows raised while it was
        // read stay, and rows answered meanwhile stay gone.
        const byId = new Map(page.nodes.filter((n) => !gone.current.has(n.interruptId)).map((n) => [n.interruptId, n]));
        for (const x of have ?? []) if (fresh.current.has(x.interruptId) && !byId.has(x.interruptId)) byId.set(x.interruptId, x);
        return [...byId.values()].sort((a, b) => a.raisedAt.localeCompare(b.raisedAt));
      });
      setTotal(page.totalCount);
      setMore(page.pageInfo.hasNextPage);
      setError(null);
    } catch (err) {
      if (seq === loadSeq.current) setError(err as APIError);
    }
  }, [kind, token, notify]);

  useEffect(() => {
    shownRef.current = null;
    setItems(null);
    gone.current = new Set();
    void load();
  }, [load]);

  // Moves focus out of a row that is about to go, so keyboard users keep their place.
  // (A button disabled while its answer is sent drops focus to <body>.)
  const leave = useCallback((interruptId: string) => {
    const row = document.getElementById(`row-${interruptId}`);
    const active = document.activeElement;
    if (row && (row.contains(active) || active === document.body || active === null)) {
      const next = (row.nextElementSibling ?? row.previousElementSibling) as HTMLElement | null;
      const target = next?.querySelector<HTMLElement>('h2 a') ?? heading.current;
      target?.focus();
    }
  }, []);

  const remove = useCallback(
    (interruptId: string) => {
      gone.current.add(interruptId);
      leave(interruptId);
      setItems((l) => l?.filter((x) => x.interruptId !== interruptId) ?? l);
    },
    [leave],
  );

  const subError = useSubscription<InboxUpdate>(inboxSub, { kind: kind || null }, `inbox:${kind}`, (d) => {
    const u = d.inboxUpdates;
    setTotal(u.pending);
    if (u.kind === 'CURRENT') {
      void load(); // (re)subscribed: read the inbox as it is now
      return;
    }
    const it = u.item;
    if (!it) return;
    if (u.kind === 'RAISED') {
      if (gone.current.has(it.interruptId)) return;
      fresh.current.add(it.interruptId);
      setItems((l) => {
        if (l === null) return [it];
        if (l.some((x) => x.interruptId === it.interruptId)) return l;
        return [...l, it].sort((a, b) => a.raisedAt.localeCompare(b.raisedAt));
      });
      return;
    }
    // ANSWERED or CLOSED
    if (gone.current.has(it.interruptId)) return; // answered here: its notice is out
    if (u.kind === 'ANSWERED' && sending.current.has(it.interruptId)) return; // this tab's own answer: its notice comes with it
    const shown = items?.some((x) => x.interruptId === it.interruptId);
    remove(it.interruptId);
    if (!shown) return;
    const resp = it.approval?.response ?? it.hold?.response;
    notify(
      <>
        {u.kind === 'ANSWERED' && resp
          ? `${resp.responder} answered ${what(it)} in session ${it.session.id} elsewhere (${resp.decision}).`
          : `${cap(what(it))} in session ${it.session.id} no longer waits (the session closed or went on).`}{' '}
        <Link to={paths.session(it.action.id, it.session.id)}>Open the session</Link>
      </>,
      'warn',
    );
  });

  const answered = (it: InboxItem) => (a: Answered) => {
    remove(it.interruptId);
    notify(
      <>
        {verb[a.decision]} {what(it)} in session {it.session.id}.{' '}
        <Link to={paths.session(it.action.id, it.session.id)}>Follow the session</Link>
      </>,
      'ok',
    );
  };
  const goneElsewhere = (it: InboxItem) => (err: APIError) => {
    remove(it.interruptId);
    notify(
      <>
        {cap(what(it))} in session {it.session.id} was not answered: {err.message}{' '}
        <Link to={paths.session(it.action.id, it.session.id)}>Open the session</Link>
      </>,
      'warn',
    );
  };

  return (
    <>
      <div className="screen-head">
        <h1 ref={heading} tabIndex={-1}>
          Inbox{' '}
          <span className="count" aria-live="polite">
            {total} waiting
          </span>
        </h1>
        <form className="filters" onSubmit={(e) => e.preventDefault()}>
          <label htmlFor="inbox-kind">Show</label>
          <select
            id="inbox-kind"
            value={kind}
            onChange={(e) => {
              const v = e.target.value;
              setParams(v ? { kind: v } : {});
            }}
          >
            {kinds.map(([v, label]) => (
              <option key={v} value={v}>
                {label}
              </option>
            ))}
          </select>
        </form>
      </div>
      <Problem error={error} what="The inbox could not be read" />
      <Problem error={subError} what="Live updates stopped" />
      {items === null && !error ? <Loading what="the inbox" /> : null}
      {items && items.length === 0 ? <p className="empty">Nothing waits for an answer. New requests appear here as they are raised.</p> : null}
      {items && items.length > 0 ? (
        <ol className="inbox" aria-label="Waiting for an answer, oldest first">
          {items.map((it) => (
            <Row
              key={it.interruptId}
              item={it}
              now={now}
              onAnswered={answered(it)}
              onGone={goneElsewhere(it)}
              onSending={(on) => (on ? sending.current.add(it.interruptId) : sending.current.delete(it.interruptId))}
            />
          ))}
        </ol>
      ) : null}
      {more ? <p className="muted">The oldest {items?.length} are shown; answer them to see more.</p> : null}
    </>
  );
}

function Row({
  item,
  now,
  onAnswered,
  onGone,
  onSending,
}: {
  item: InboxItem;
  now: number;
  onAnswered: (a: Answered) => void;
  onGone: (e: APIError) => void;
  onSending: (on: boolean) => void;
}) {
  const titleId = `title-${item.interruptId}`;
  return (
    <li id={`row-${item.interruptId}`} className={`item item-${item.kind.toLowerCase()}`} aria-labelledby={titleId} data-interrupt={item.interruptId}>
      <div className="item-head">
        <span className={`tag tag-${item.kind.toLowerCase()}`}>{item.kind === 'APPROVAL' ? 'Approval' : 'Held turn'}</span>
        <h2 id={titleId}>
          <Link to={paths.interrupt(item.action.id, item.session.id, item.interruptId)}>
            {item.kind === 'APPROVAL' ? (
              <>
                <code>{item.approval?.tool}</code> in {item.actionName}
              </>
            ) : (
              <>
                Turn {item.hold?.turn} of {item.actionName} is held
              </>
            )}
          </Link>
        </h2>
        <time className="waited" dateTime={item.raisedAt} title={`raised ${stamp(item.raisedAt)}`}>
          {waitingFor(item.raisedAt, now)}
        </time>
      </div>
      <p className="item-meta">
        Session <Link to={paths.session(item.action.id, item.session.id)}>{item.session.id}</Link>
        {item.approval ? <> · tool version {item.approval.toolVersion}</> : null}
      </p>
      {item.approval ? (
        <div className="asked">
          <p>The agent asks to run it with:</p>
          <Value value={item.approval.input} label="The call's input" />
        </div>
      ) : null}
      {item.hold ? (
        <div className="asked">
          <p>
            {item.hold.cause === 'REFUSED' ? 'The model refused to go on' : 'The turn ended without an outcome after its retries'}
            {item.hold.category ? (
              <>
                {' '}
                (category <strong>{item.hold.category}</strong>)
              </>
            ) : null}
            .
          </p>
          {item.hold.explanation ? <blockquote>{item.hold.explanation}</blockquote> : null}
        </div>
      ) : null}
      <AnswerForm item={item} onAnswered={onAnswered} onGone={onGone} onSending={onSending} />
    </li>
  );
}
