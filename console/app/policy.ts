// What the signed-in caller may do, from its policies (Query.viewer), by
// the rules of the server's auth package: a policy on a broader resource
// covers the narrower ones (`*` everything, `financial.Action.document`
// each action, `ledger` each namespace), ADMIN implies every other policy
// action and WRITE implies CALL. The console uses it only to hide what the
// caller cannot read or do; the server decides every request itself.

export type PolicyAction = 'READ' | 'WRITE' | 'RESPOND' | 'CLOSE' | 'CALL' | 'ADMIN';

export interface Policy {
  action: PolicyAction;
  resource: string;
}

export interface Viewer {
  id: string;
  dev: boolean;
  policies: Policy[];
}

export const ALL = '*';
export const ACTIONS = 'financial.Action.document';
export const LEDGER = 'ledger';

/** The resource naming one action. */
export const actionResource = (id: string): string => `${ACTIONS}:${id}`;

const implies = (have: PolicyAction, want: PolicyAction): boolean =>
  have === want || have === 'ADMIN' || (have === 'WRITE' && want === 'CALL');

const covers = (r: string, want: string): boolean => {
  if (r === want || r === ALL) return true;
  if (r === ACTIONS) return want.startsWith(`${ACTIONS}:`);
  if (r === LEDGER) return want.startsWith(`${LEDGER}:`);
  return false;
};

/** Whether v may do action on resource. */
export function allows(v: Viewer | null, action: PolicyAction, resource: string): boolean {
  if (!v) return false;
  if (v.dev) return true;
  return v.policies.some((p) => implies(p.action, action) && covers(p.resource, resource));
}

/**
 * The actions v may READ: 'all', or the ids its policies name (in the
 * order given, each once).
 */
export function readableActions(v: Viewer | null): 'all' | string[] {
  if (!v) return [];
  if (allows(v, 'READ', ACTIONS)) return 'all';
  const ids: string[] = [];
  for (const p of v.policies) {
    if (!implies(p.action, 'READ') || !p.resource.startsWith(`${ACTIONS}:`)) continue;
    const id = p.resource.slice(ACTIONS.length + 1);
    if (!ids.includes(id)) ids.push(id);
  }
  return ids;
}

/** What the console offers v, as switches. */
export interface Abilities {
  /** Read every action (list them). */
  listActions: boolean;
  /** Read the whole ledger (the Ledger screen, events under sessions). */
  readLedger: boolean;
  readAction: (id: string) => boolean;
  respond: (id: string) => boolean;
  close: (id: string) => boolean;
  /** Change the action (and dry run a definition for it). */
  write: (id: string) => boolean;
}

export function abilities(v: Viewer | null): Abilities {
  return {
    listActions: allows(v, 'READ', ACTIONS),
    readLedger: allows(v, 'READ', LEDGER),
    readAction: (id) => allows(v, 'READ', actionResource(id)),
    respond: (id) => allows(v, 'RESPOND', actionResource(id)),
    close: (id) => allows(v, 'CLOSE', actionResource(id)),
    write: (id) => allows(v, 'WRITE', actionResource(id)),
  };
}
