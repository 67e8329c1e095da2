// The frame of every screen: a skip link, the navigation with the inbox's
// live count, the connection state and who is signed in.
import { useState } from 'react';
import { NavLink, Outlet, useLocation } from 'react-router';

import { useSubscription } from './hooks';
import { useConsole } from './session';
import { NoticeArea } from './ui';

const countSub = `subscription InboxCount { inboxUpdates { kind pending } }`;

export function Layout() {
  const { viewer, token, can, liveState, signOut } = useConsole();
  const [pending, setPending] = useState<number | null>(null);
  useSubscription<{ inboxUpdates: { pending: number } }>(countSub, {}, 'count', (d) => setPending(d.inboxUpdates.pending));
  const loc = useLocation();
  const inboxActive = loc.pathname === '/' || loc.pathname === '/inbox';

  return (
    <div className="frame">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">actionsledger</span>
        <nav aria-label="Screens">
          <ul>
            <li>
              <NavLink to="/" end className={inboxActive ? 'active' : undefined} aria-current={inboxActive ? 'page' : undefined}>
                Inbox
                {pending !== null ? (
                  <span className={`badge${pending > 0 ? ' badge-on' : ''}`} aria-label={`${pending} waiting`} data-testid="inbox-badge">
                    {pending}
                  </span>
                ) : null}
              </NavLink>
            </li>
            <li>
              <NavLink to="/sessions" className={({ isActive }) => (isActive || /\/sessions/.test(loc.pathname) ? 'active' : undefined)}>
                Sessions
              </NavLink>
            </li>
            <li>
              <NavLink to="/actions" end>
                Actions
              </NavLink>
            </li>
            {can.readLedger ? (
              <li>
                <NavLink to="/ledger">Ledger</NavLink>
              </li>
            ) : null}
          </ul>
        </nav>
        <div className="who">
          <span className={`live live-${liveState}`} role="status" title="Live updates (WebSocket)">
            {liveState === 'live' ? 'live' : liveState === 'connecting' ? 'connecting…' : 'offline, retrying'}
          </span>
          <span className="principal" title="Signed in as">
            {viewer.dev ? 'dev mode' : viewer.id}
          </span>
          {token ? (
            <button type="button" className="link" onClick={() => signOut()}>
              Sign out
            </button>
          ) : null}
        </div>
      </header>
      <NoticeArea />
      <main id="main" tabIndex={-1}>
        <Outlet />
      </main>
    </div>
  );
}
