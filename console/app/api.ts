// The console's client of the GraphQL API: queries and mutations over
// POST /graphql, subscriptions over graphql-transport-ws on the same path
// (one WebSocket for all of them), both with the bearer token when there is
// one. Everything goes to the page's own origin.
import { createClient, type Client } from 'graphql-ws';

/** One error of a GraphQL answer, with its stable code and field. */
export interface GQLErrorItem {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; field?: string; retryable?: boolean };
}

/** A refused or failed request: the first error's code, message and field. */
export class APIError extends Error {
  readonly code: string;
  readonly field?: string;
  readonly errors: GQLErrorItem[];
  constructor(errors: GQLErrorItem[], fallback = 'request failed') {
    const first = errors[0];
    super(first?.message ?? fallback);
    this.name = 'APIError';
    this.errors = errors;
    this.code = first?.extensions?.code ?? 'NETWORK';
    this.field = first?.extensions?.field;
  }
}

/** Whether err means the caller has no valid token (sign in again). */
export const unauthenticated = (err: unknown): boolean =>
  err instanceof APIError && err.code === 'UNAUTHENTICATED';

/** The endpoint of the page's own server. */
export const endpoint = '/graphql';

/** The WebSocket URL of the API for a page at location. */
export function socketUrl(location: Pick<Location, 'protocol' | 'host'>): string {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${endpoint}`;
}

/**
 * request sends one operation and returns its data. Errors: APIError with
 * the server's code (a GraphQL error, or HTTP failure as NETWORK / HTTP_<n>).
 * With partial data and errors, the errors win: the console shows nothing
 * half-read.
 */
export async function request<T>(
  query: string,
  variables: Record<string, unknown> = {},
  token: string | null = null,
  signal?: AbortSignal,
): Promise<T> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/graphql-response+json, application/json',
  };
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp: Response;
  try {
    resp = await fetch(endpoint, { method: 'POST', headers, body: JSON.stringify({ query, variables }), signal });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new APIError([{ message: 'the server cannot be reached', extensions: { code: 'NETWORK', retryable: true } }]);
  }
  let body: { data?: T; errors?: GQLErrorItem[] };
  try {
    body = await resp.json();
  } catch {
    throw new APIError([{ message: `the server answered HTTP ${resp.status}`, extensions: { code: `HTTP_${resp.status}` } }]);
  }
  if (body.errors?.length) throw new APIError(body.errors);
  if (body.data === undefined || body.data === null) {
    throw new APIError([{ message: `no data (HTTP ${resp.status})`, extensions: { code: `HTTP_${resp.status}` } }]);
  }
  return body.data;
}

/** Connection state of the subscriptions' WebSocket, for the header. */
export type LiveState = 'connecting' | 'live' | 'offline';

/** A WebSocket client for token, reporting its state to onState. */
export function liveClient(token: string | null, onState: (s: LiveState) => void): Client {
  const client = createClient({
    url: socketUrl(window.location),
    connectionParams: token ? { Authorization: `Bearer ${token}` } : {},
    lazy: true,
    lazyCloseTimeout: 5_000,
    keepAlive: 20_000,
    retryAttempts: Number.MAX_SAFE_INTEGER,
    shouldRetry: () => true,
    retryWait: async (retries) => {
      // 1 s, 2 s, 4 s ... at most 15 s, with jitter.
      const ms = Math.min(15_000, 1000 * 2 ** Math.min(retries, 4)) + Math.random() * 500;
      await new Promise((r) => setTimeout(r, ms));
    },
  });
  client.on('connecting', () => onState('connecting'));
  client.on('connected', () => onState('live'));
  client.on('closed', () => onState('offline'));
  return client;
}

/**
 * subscribe starts one subscription on client: onNext gets each update's
 * data; onEnd the error that ended it (an APIError), or nothing when the
 * server completed it. Returns the function that stops it.
 */
export function subscribe<T>(
  client: Client,
  query: string,
  variables: Record<string, unknown>,
  onNext: (data: T) => void,
  onEnd: (err?: APIError) => void,
): () => void {
  return client.subscribe<T>(
    { query, variables },
    {
      next: (r) => {
        if (r.errors?.length) {
          onEnd(new APIError(r.errors as GQLErrorItem[]));
          return;
        }
        if (r.data) onNext(r.data as T);
      },
      error: (err) => {
        if (Array.isArray(err)) onEnd(new APIError(err as GQLErrorItem[]));
        else if (err instanceof CloseEvent || (err && typeof err === 'object' && 'code' in err && 'reason' in err)) {
          const ev = err as CloseEvent;
          onEnd(new APIError([{ message: ev.reason || `the connection closed (${ev.code})`, extensions: { code: closeCode(ev) } }]));
        } else onEnd(new APIError([{ message: String((err as Error)?.message ?? err), extensions: { code: 'NETWORK' } }]));
      },
      complete: () => onEnd(),
    },
  );
}

/** The error code a WebSocket close carries (graphql-ws 4403: forbidden). */
function closeCode(ev: CloseEvent): string {
  if (ev.code === 4403) return 'FORBIDDEN';
  if (ev.code === 4401 || /UNAUTHENTICATED/.test(ev.reason)) return 'UNAUTHENTICATED';
  return 'NETWORK';
}
