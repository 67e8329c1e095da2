// The signed-in session of the console: the bearer token (kept in this
// tab's sessionStorage only, never in localStorage or a cookie), the viewer
// it stands for, and the one WebSocket client all subscriptions share.
import type { Client } from 'graphql-ws';
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';

import { liveClient, request, unauthenticated, type LiveState } from './api';
import { abilities, type Abilities, type Viewer } from './policy';

const storageKey = 'actionsledger.console.token';

function storedToken(): string | null {
  try {
    return window.sessionStorage.getItem(storageKey);
  } catch {
    return null;
  }
}

function storeToken(token: string | null) {
  try {
    if (token) window.sessionStorage.setItem(storageKey, token);
    else window.sessionStorage.removeItem(storageKey);
  } catch {
    // storage disabled: the token lasts as long as the page
  }
}

export interface ConsoleSession {
  token: string | null;
  viewer: Viewer;
  can: Abilities;
  live: Client;
  liveState: LiveState;
  /** Forget the token (sign out), with an optional reason to show. */
  signOut: (why?: string) => void;
}

const Ctx = createContext<ConsoleSession | null>(null);

export function useConsole(): ConsoleSession {
  const c = useContext(Ctx);
  if (!c) throw new Error('useConsole outside the console');
  return c;
}

export const viewerQuery = `query Viewer { viewer { id dev policies { action resource } } }`;

type Boot =
  | { state: 'loading' }
  | { state: 'signin'; why?: string }
  | { state: 'failed'; message: string }
  | { state: 'ready'; viewer: Viewer };

/**
 * SessionGate asks the server who the token (if any) is; without a token
 * that works it shows signIn, and children once it does.
 */
export function SessionGate({ children, signIn }: { children: ReactNode; signIn: (p: { onToken: (t: string) => Promise<string | null>; why?: string }) => ReactNode }) {
  const [token, setToken] = useState<string | null>(storedToken);
  const [boot, setBoot] = useState<Boot>({ state: 'loading' });
  const [liveState, setLiveState] = useState<LiveState>('connecting');
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    const ctl = new AbortController();
    setBoot({ state: 'loading' });
    request<{ viewer: Viewer }>(viewerQuery, {}, token, ctl.signal).then(
      (d) => setBoot({ state: 'ready', viewer: d.viewer }),
      (err) => {
        if (ctl.signal.aborted) return;
        if (unauthenticated(err)) {
          if (token) storeToken(null);
          setBoot({ state: 'signin', why: token ? 'The token was refused: it may have been revoked.' : undefined });
        } else setBoot({ state: 'failed', message: (err as Error).message });
      },
    );
    return () => ctl.abort();
  }, [token, attempt]);

  const live = useMemo(() => liveClient(token, setLiveState), [token]);
  useEffect(() => () => void live.dispose(), [live]);

  const signOut = useCallback((why?: string) => {
    storeToken(null);
    setToken(null);
    setBoot({ state: 'signin', why });
  }, []);

  const onToken = useCallback(async (t: string): Promise<string | null> => {
    try {
      await request<{ viewer: Viewer }>(viewerQuery, {}, t);
    } catch (err) {
      return unauthenticated(err) ? 'This token is not valid.' : (err as Error).message;
    }
    storeToken(t);
    setToken(t);
    return null;
  }, []);

  if (boot.state === 'loading') return <p className="boot" role="status">Loading the console…</p>;
  if (boot.state === 'signin') return <>{signIn({ onToken, why: boot.why })}</>;
  if (boot.state === 'failed') {
    return (
      <main className="boot" id="main">
        <h1>The console cannot reach the server</h1>
        <p role="alert">{boot.message}</p>
        <button type="button" onClick={() => setAttempt((n) => n + 1)}>
          Try again
        </button>
      </main>
    );
  }
  const value: ConsoleSession = { token, viewer: boot.viewer, can: abilities(boot.viewer), live, liveState, signOut };
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}
