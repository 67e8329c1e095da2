// Issue 12 (GraphiQL): subscriptions go to the page's own host over
// WebSocket, queries and mutations to POST /graphql on the same origin.
import { parse } from 'graphql';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { examples } from './examples';
import { fetcher, subscriptionUrl } from './fetcher';

/**
 * FakeSocket stands in for the browser's WebSocket: it records what the
 * graphql-ws client sends and answers as a graphql-transport-ws server
 * would, with one event for each subscription, then complete.
 */
class FakeSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSING = 2;
  static CLOSED = 3;
  static opened: FakeSocket[] = [];
  /** refuse makes the next sockets fail as a refused handshake does. */
  static refuse = false;
  /** silent makes a subscribe go unanswered (a subscription waiting for events). */
  static silent = false;
  /** reject, when set, is the error payload answered to a subscribe. */
  static reject: unknown[] | null = null;

  readyState = FakeSocket.CONNECTING;
  sent: Record<string, unknown>[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: string }) => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  onerror: ((e: unknown) => void) | null = null;

  constructor(
    readonly url: string,
    readonly protocol: string,
  ) {
    FakeSocket.opened.push(this);
    setTimeout(() => {
      if (FakeSocket.refuse) {
        this.readyState = FakeSocket.CLOSED;
        this.onerror?.(new Event('error'));
        this.onclose?.({ code: 1006, reason: '' });
        return;
      }
      this.readyState = FakeSocket.OPEN;
      this.onopen?.();
    });
  }

  send(text: string) {
    const msg = JSON.parse(text) as { type: string; id?: string };
    this.sent.push(msg);
    const reply = (m: object) => setTimeout(() => this.onmessage?.({ data: JSON.stringify(m) }));
    if (msg.type === 'connection_init') reply({ type: 'connection_ack' });
    if (msg.type === 'subscribe' && FakeSocket.silent) {
      return;
    } else if (msg.type === 'subscribe' && FakeSocket.reject) {
      reply({ id: msg.id, type: 'error', payload: FakeSocket.reject });
    } else if (msg.type === 'subscribe') {
      reply({ id: msg.id, type: 'next', payload: { data: { ledgerEvents: { position: '1' } } } });
      reply({ id: msg.id, type: 'complete' });
    }
  }

  close(code = 1000, reason = '') {
    this.readyState = FakeSocket.CLOSED;
    this.onclose?.({ code, reason });
  }
}

/** first returns what a fetcher gives first: its value, or its first yield. */
async function first(result: unknown): Promise<unknown> {
  const r = await result;
  if (r !== null && typeof r === 'object' && Symbol.asyncIterator in r) {
    for await (const v of r as AsyncIterable<unknown>) return v;
  }
  return r;
}

describe('subscriptionUrl', () => {
  it.each([
    [{ protocol: 'http:', host: '127.0.0.1:8080' }, 'ws://127.0.0.1:8080/graphql'],
    [{ protocol: 'https:', host: 'ledger.example.org' }, 'wss://ledger.example.org/graphql'],
    [{ protocol: 'http:', host: '[::1]:9000' }, 'ws://[::1]:9000/graphql'],
  ])('%o -> %s', (location, want) => {
    expect(subscriptionUrl(location)).toBe(want);
  });
});

describe('fetcher', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    FakeSocket.opened = [];
    FakeSocket.refuse = false;
    FakeSocket.reject = null;
    FakeSocket.silent = false;
  });

  it('posts queries as JSON to /graphql on the same origin', async () => {
    const calls: { url: string; init: RequestInit }[] = [];
    vi.stubGlobal('window', {
      fetch: async (url: string, init: RequestInit) => {
        calls.push({ url, init });
        return new Response(JSON.stringify({ data: { __typename: 'Query' } }), {
          headers: { 'content-type': 'application/json' },
        });
      },
    });
    const f = fetcher({ protocol: 'http:', host: '127.0.0.1:8080' });
    const result = await first(f({ query: '{ __typename }', operationName: null }, { documentAST: parse('{ __typename }') }));
    expect(result).toEqual({ data: { __typename: 'Query' } });
    expect(calls).toHaveLength(1);
    expect(calls[0].url).toBe('/graphql');
    expect(calls[0].init.method).toBe('POST');
    expect(new Headers(calls[0].init.headers).get('content-type')).toBe('application/json');
  });

  it('sends subscriptions over graphql-transport-ws to ws(s)://<host>/graphql with the headers as connection params', async () => {
    vi.stubGlobal('window', { fetch: () => Promise.reject(new Error('a subscription must not use fetch')) });
    vi.stubGlobal('WebSocket', FakeSocket);
    const f = fetcher({ protocol: 'https:', host: 'ledger.example.org' });
    const query = 'subscription Follow { ledgerEvents { position } }';
    const result = await first(
      f({ query, operationName: 'Follow' }, { documentAST: parse(query), headers: { Authorization: 'Bearer t' } }),
    );
    expect(result).toEqual({ data: { ledgerEvents: { position: '1' } } });
    const [socket] = FakeSocket.opened;
    expect(socket.url).toBe('wss://ledger.example.org/graphql');
    expect(socket.protocol).toBe('graphql-transport-ws');
    expect(socket.sent[0]).toEqual({ type: 'connection_init', payload: { Authorization: 'Bearer t' } });
    expect(socket.sent[1]).toMatchObject({ type: 'subscribe', payload: { query, operationName: 'Follow' } });
  });

  it('stops a subscription at once, closing its socket, while a result is awaited', async () => {
    vi.stubGlobal('window', { fetch: () => Promise.reject(new Error('a subscription must not use fetch')) });
    vi.stubGlobal('WebSocket', FakeSocket);
    FakeSocket.silent = true;
    const f = fetcher({ protocol: 'http:', host: '127.0.0.1:8080' });
    const query = 'subscription { ledgerEvents { position } }';
    const it = (await f({ query, operationName: null }, { documentAST: parse(query) })) as AsyncIterableIterator<unknown>;
    const pending = it.next();
    await vi.waitFor(() => expect(FakeSocket.opened[0]?.sent.map((m) => m.type)).toContain('subscribe'));
    await it.return?.();
    expect(FakeSocket.opened[0].readyState).toBe(FakeSocket.CLOSED);
    expect(FakeSocket.opened[0].sent.map((m) => m.type)).toEqual(['connection_init', 'subscribe', 'complete']);
    await expect(pending).resolves.toEqual({ done: true, value: undefined });
  });

  it('shows errors the server sends for a subscription as its result', async () => {
    vi.stubGlobal('window', { fetch: () => Promise.reject(new Error('a subscription must not use fetch')) });
    vi.stubGlobal('WebSocket', FakeSocket);
    FakeSocket.reject = [{ message: 'not allowed', extensions: { code: 'FORBIDDEN' } }];
    const f = fetcher({ protocol: 'http:', host: '127.0.0.1:8080' });
    const query = 'subscription { ledgerEvents { position } }';
    const result = await first(f({ query, operationName: null }, { documentAST: parse(query) }));
    expect(result).toEqual({ errors: [{ message: 'not allowed', extensions: { code: 'FORBIDDEN' } }] });
  });

  it('says which WebSocket failed when the server refuses it', async () => {
    vi.stubGlobal('window', { fetch: () => Promise.reject(new Error('a subscription must not use fetch')) });
    vi.stubGlobal('WebSocket', FakeSocket);
    FakeSocket.refuse = true;
    const f = fetcher({ protocol: 'http:', host: '127.0.0.1:8080' });
    const query = 'subscription { ledgerEvents { position } }';
    await expect(first(f({ query, operationName: null }, { documentAST: parse(query) }))).rejects.toThrow(
      'The WebSocket to ws://127.0.0.1:8080/graphql failed',
    );
  });
});

describe('examples', () => {
  it('each parses as one named operation', () => {
    for (const e of examples) {
      const doc = parse(e.query);
      const ops = doc.definitions.filter((d) => d.kind === 'OperationDefinition');
      expect(ops, e.title).toHaveLength(1);
      expect(ops[0].kind === 'OperationDefinition' && ops[0].name?.value, e.title).toBeTruthy();
    }
  });

  it('includes the seed operations verbatim', () => {
    const names = examples.map((e) => e.source).filter((s) => s !== '');
    expect(names).toEqual(['create_monitor.graphql', 'session_query.graphql', 'approve.graphql', 'retry_held_turn.graphql']);
  });
});
