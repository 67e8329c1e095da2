// The fetcher GraphiQL sends operations with: queries and mutations as
// POST /graphql (@graphiql/toolkit's createGraphiQLFetcher), subscriptions
// over graphql-transport-ws (the graphql-ws client) at
// ws(s)://<the page's host>/graphql; both on the page's own origin.
//
// Subscriptions do not go through the toolkit's subscriptionUrl option: its
// adapter leaves an unhandled promise rejection behind whenever a
// subscription fails, and shows a refused WebSocket as {"isTrusted": true}.
import { createGraphiQLFetcher, type Fetcher, type FetcherParams } from '@graphiql/toolkit';
import { getOperationAST, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import { createClient, type FormattedExecutionResult } from 'graphql-ws';

/** Where the API is, relative to the page's origin. */
export const GRAPHQL_PATH = '/graphql';

/**
 * subscriptionUrl returns the WebSocket URL of the API on the page's host:
 * wss: for a page served over https:, ws: otherwise.
 */
export function subscriptionUrl(location: Pick<Location, 'protocol' | 'host'>): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${GRAPHQL_PATH}`;
}

/**
 * fetcher builds GraphiQL's fetcher for a page at location. The headers of
 * GraphiQL's header editor (an Authorization: Bearer token when AUTH=on)
 * go with every HTTP request and, for a subscription, as the payload of the
 * WebSocket's connection_init message.
 */
export function fetcher(location: Pick<Location, 'protocol' | 'host'>): Fetcher {
  const ws = subscriptionUrl(location);
  const http = createGraphiQLFetcher({ url: GRAPHQL_PATH });
  return (params, opts) => {
    const doc = opts?.documentAST;
    if (doc && getOperationAST(doc, params.operationName ?? undefined)?.operation === 'subscription') {
      // Results as they come over the wire, as the HTTP fetcher gives them
      // too; Fetcher's type names the server-side shape.
      return subscribe(ws, params, opts?.headers) as AsyncIterable<unknown> as AsyncIterable<ExecutionResult>;
    }
    return http(params, opts);
  };
}

/**
 * subscribe runs one subscription on a WebSocket of its own, giving each
 * result until the server completes it or GraphiQL stops it (return(),
 * which unsubscribes and closes the socket at once, even while a result is
 * awaited: an async generator would queue it behind that result). Errors
 * the server sends for the operation are given as a result; a socket that
 * fails or closes ends the stream with an Error that says so.
 */
function subscribe(
  url: string,
  params: FetcherParams,
  headers: Record<string, unknown> | undefined,
): AsyncIterableIterator<FormattedExecutionResult<Record<string, unknown>, unknown>> {
  const client = createClient({ url, connectionParams: headers });
  const results = client.iterate({
    query: params.query,
    operationName: params.operationName ?? undefined,
    variables: params.variables ?? undefined,
  });
  let finished = false;
  const finish = async () => {
    if (!finished) {
      finished = true;
      await client.dispose();
    }
  };
  const end = { done: true, value: undefined } as const;
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      if (finished) return end;
      try {
        const r = await results.next();
        if (r.done) await finish();
        return r;
      } catch (err) {
        await finish();
        if (Array.isArray(err)) return { done: false, value: { errors: err as GraphQLFormattedError[] } };
        throw explain(err, url);
      }
    },
    async return() {
      await results.return?.();
      await finish();
      return end;
    },
  };
}

/** explain turns what a graphql-ws client throws into an Error naming the socket. */
function explain(err: unknown, url: string): Error {
  if (err instanceof Error) return err;
  if (typeof err === 'object' && err !== null && 'code' in err && 'reason' in err) {
    return new Error(`The WebSocket to ${url} closed: ${String(err.code)} ${String(err.reason)}`.trim());
  }
  return new Error(`The WebSocket to ${url} failed (the server refused it or could not be reached).`);
}
