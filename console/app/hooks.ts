// Data hooks of the console: queries over HTTP, subscriptions over the
// shared WebSocket, and a ticking clock for "how long ago".
import { useCallback, useEffect, useRef, useState } from 'react';

import { APIError, request, subscribe, unauthenticated } from './api';
import { useConsole } from './session';

export interface QueryState<T> {
  data: T | null;
  error: APIError | null;
  loading: boolean;
  /** Read again; the data shown stays until the new answer comes. */
  refetch: () => void;
}

/**
 * useQuery runs query with vars whenever key changes (and on refetch),
 * keeping the last answer while a new one is on its way. A refused token
 * signs the console out. skip leaves it idle.
 */
export function useQuery<T>(query: string, vars: Record<string, unknown>, key: string, skip = false): QueryState<T> {
  const { token, signOut } = useConsole();
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<APIError | null>(null);
  const [loading, setLoading] = useState(!skip);
  const [n, setN] = useState(0);
  const varsRef = useRef(vars);
  varsRef.current = vars;
  const lastKey = useRef(key);

  useEffect(() => {
    if (skip) {
      setLoading(false);
      return;
    }
    if (lastKey.current !== key) {
      lastKey.current = key;
      setData(null); // another thing: do not show the last one's data
    }
    const ctl = new AbortController();
    setLoading(true);
    request<T>(query, varsRef.current, token, ctl.signal).then(
      (d) => {
        setData(d);
        setError(null);
        setLoading(false);
      },
      (err) => {
        if (ctl.signal.aborted) return;
        if (unauthenticated(err)) signOut('The token was refused: it may have been revoked.');
        setError(err instanceof APIError ? err : new APIError([{ message: String(err) }]));
        setLoading(false);
      },
    );
    return () => ctl.abort();
  }, [query, key, n, token, signOut, skip]);

  const refetch = useCallback(() => setN((x) => x + 1), []);
  return { data, error, loading, refetch };
}

/**
 * useSubscription follows query with vars while enabled, passing each
 * update's data to onNext (the latest function given is called). When the
 * server ends it with an error that a new subscription can get past (a
 * lagging subscriber, a restart), it subscribes again after a pause and
 * onRestart is called (the first update then says where things stand).
 * Returns the error that ended it for good, if any.
 */
export function useSubscription<T>(
  query: string,
  vars: Record<string, unknown>,
  key: string,
  onNext: (data: T) => void,
  enabled = true,
): APIError | null {
  const { live, signOut } = useConsole();
  const [failed, setFailed] = useState<APIError | null>(null);
  const next = useRef(onNext);
  next.current = onNext;
  const varsRef = useRef(vars);
  varsRef.current = vars;

  useEffect(() => {
    if (!enabled) return;
    let stop: (() => void) | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let closed = false;
    let tries = 0;
    const start = () => {
      stop = subscribe<T>(
        live,
        query,
        varsRef.current,
        (d) => {
          tries = 0;
          setFailed(null);
          next.current(d);
        },
        (err) => {
          if (closed || !err) return; // completed by the server: nothing more comes
          if (err.code === 'UNAUTHENTICATED') {
            signOut('The token was refused: it may have been revoked.');
            return;
          }
          if (['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'GRAPHQL_VALIDATION_FAILED'].includes(err.code)) {
            setFailed(err);
            return;
          }
          tries++;
          timer = setTimeout(start, Math.min(10_000, 500 * 2 ** Math.min(tries, 5)));
        },
      );
    };
    start();
    return () => {
      closed = true;
      clearTimeout(timer);
      stop?.();
    };
  }, [live, query, key, enabled, signOut]);
  return failed;
}

/** The current time, updated every ms milliseconds. */
export function useNow(ms = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

/** Sets the document title while a screen is shown. */
export function useTitle(title: string) {
  useEffect(() => {
    document.title = `${title} · actionsledger`;
  }, [title]);
}

/** The width under which the console lays out for a phone (console.css uses the same). */
export const narrowQuery = '(max-width: 760px)';

/** Whether the media query q matches, following changes (a rotated phone, a resized window). */
export function useMedia(q: string): boolean {
  const [on, setOn] = useState(() => window.matchMedia(q).matches);
  useEffect(() => {
    const m = window.matchMedia(q);
    const change = () => setOn(m.matches);
    change();
    m.addEventListener('change', change);
    return () => m.removeEventListener('change', change);
  }, [q]);
  return on;
}
