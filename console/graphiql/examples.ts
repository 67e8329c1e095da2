// The operations GraphiQL opens with, in the order a newcomer runs them.
// The seed's operations are imported from examples, where the Go
// tests keep them verbatim, so the page shows exactly what the tests run;
// Vite inlines them into the bundle at build time.
import createMonitor from '../../examples/create_monitor.graphql?raw';
import sessionQuery from '../../examples/session_query.graphql?raw';
import approve from '../../examples/approve.graphql?raw';
import retryHeldTurn from '../../examples/retry_held_turn.graphql?raw';

/** One example: an operation and the variables it opens with. */
export interface Example {
  /** Short name shown in the Examples panel. */
  title: string;
  /** One or two sentences on what the operation does and what it needs. */
  description: string;
  /** Where the operation comes from: a file under examples, or "". */
  source: string;
  /** The operation's text. */
  query: string;
  /** The variables, as JSON with comments (GraphiQL's variables editor reads JSONC). */
  variables: string;
}

/** The monitor's action id used by the examples (any UUID will do). */
export const MONITOR_ID = '4f1c2a7e-9b3d-4e6f-8a21-5c7d9e0b1f34';
/** The account the examples open; the monitor keys its sessions by it. */
export const ACCOUNT_ID = '3f0c9f8e-0000-4000-8000-000000000001';

// Not one of the seed's files: the writes that make the monitor's session
// start and run a turn, so that the session query has something to show.
const openAccount = `# Opens an account and posts an entry. The account.inserted event starts
# the monitor's session for the account; the entry.inserted event runs its
# first turn. Run CreateMonitor first.
mutation OpenAccount($account: String!, $accountValue: JSON!, $entryValue: JSON!) {
  ledger {
    account: putValue(namespace: "account", key: $account, value: $accountValue, idempotencyKey: "open-1") {
      key
      version
    }
    entry: putValue(namespace: "entry", key: "e1", value: $entryValue, idempotencyKey: "entry-1") {
      key
      version
    }
  }
}
`;

const ledgerEvents = `# Follows the ledger live: every event committed from now on, over a
# WebSocket to this server's /graphql. Run it, then write something in
# another tab; stop it with the stop button.
subscription LedgerEvents {
  ledgerEvents {
    position
    eventType
    commitTime
    data
  }
}
`;

const json = (v: unknown) => JSON.stringify(v, null, 2);

/** The examples, in the order they chain: each works on what the one before created. */
export const examples: Example[] = [
  {
    title: 'Create the monitor',
    description: 'Creates the action early-fraud-detector: a session per account, started by the account record, resumed by each entry.',
    source: 'create_monitor.graphql',
    query: createMonitor,
    variables: json({ id: MONITOR_ID }),
  },
  {
    title: 'Open an account, post an entry',
    description: "Writes two ledger records; the monitor's session for the account starts and runs its first turn.",
    source: '',
    query: openAccount,
    variables: json({
      account: ACCOUNT_ID,
      accountValue: { account_id: ACCOUNT_ID },
      entryValue: { account_id: ACCOUNT_ID, amount: 120 },
    }),
  },
  {
    title: 'Read the session',
    description: "The session's status, state and turns, with each turn's inputs, checkpoint, output and transcript.",
    source: 'session_query.graphql',
    query: sessionQuery,
    variables: json({ actionId: MONITOR_ID, id: ACCOUNT_ID }),
  },
  {
    title: 'Approve a tool call',
    description:
      'Answers a pending approval of session 3f0c9f8e-account of an agent action (agent-monitor in docs/agents.md). Fill in that action\'s id and the interruptId its session lists.',
    source: 'approve.graphql',
    query: approve,
    variables: `{
  // the id of the agent action (agent-monitor in docs/agents.md)
  "actionId": "",
  // session(id: "3f0c9f8e-account") { approvals(status: PENDING) { interruptId } }
  "interruptId": ""
}`,
  },
  {
    title: 'Retry a held turn',
    description: "Runs a held turn of session 3f0c9f8e-account again, with a note the model sees. Fill in the agent action's id and the hold's interruptId.",
    source: 'retry_held_turn.graphql',
    query: retryHeldTurn,
    variables: `{
  // the id of the agent action (agent-monitor in docs/agents.md)
  "actionId": "",
  // session(id: "3f0c9f8e-account") { holds(status: PENDING) { interruptId } }
  "interruptId": ""
}`,
  },
  {
    title: 'Follow the ledger live',
    description: 'A subscription: events appear as they commit, over a WebSocket to this server.',
    source: '',
    query: ledgerEvents,
    variables: '',
  },
];
