// The GraphQL operations of the console, with the shapes they answer.

export const inboxItemFields = `
  interruptId kind actionName raisedAt
  action { id }
  session { id status }
  approval { tool toolVersion input status mayApprove mayReplaceInput response { decision reason responder at } }
  hold { cause category explanation turn status skipRefusal response { decision note responder at } }
`;

export interface InboxItem {
  interruptId: string;
  kind: 'APPROVAL' | 'HOLD';
  actionName: string;
  raisedAt: string;
  action: { id: string };
  session: { id: string; status: string };
  approval: null | {
    tool: string;
    toolVersion: number;
    input: unknown;
    status: string;
    /** The caller may approve (RESPOND on the tool too when its owner requires approval). */
    mayApprove: boolean;
    /** The caller may approve with a replacement input (CALL on the tool too). */
    mayReplaceInput: boolean;
    response: null | { decision: string; reason: string | null; responder: string; at: string };
  };
  hold: null | {
    cause: string;
    category: string | null;
    explanation: string | null;
    turn: number;
    status: string;
    skipRefusal: string | null;
    response: null | { decision: string; note: string | null; responder: string; at: string };
  };
}

export const inboxQuery = `query Inbox($kind: InterruptKind, $after: String) { actions { inbox(first: 200, kind: $kind, after: $after) {
  totalCount pageInfo { hasNextPage endCursor } nodes { ${inboxItemFields} } } } }`;

export interface InboxPage {
  actions: { inbox: { totalCount: number; pageInfo: { hasNextPage: boolean; endCursor: string | null }; nodes: InboxItem[] } };
}

export const inboxSub = `subscription InboxLive($kind: InterruptKind) { inboxUpdates(kind: $kind) { kind pending item { ${inboxItemFields} } } }`;

export interface InboxUpdate {
  inboxUpdates: { kind: 'CURRENT' | 'RAISED' | 'ANSWERED' | 'CLOSED'; pending: number; item: InboxItem | null };
}

export const respondMutation = `mutation Respond($a: UUID!, $s: String!, $i: String!, $r: SessionResponseInput!) {
  actions { respondToSession(actionId: $a, id: $s, interruptId: $i, response: $r) { identity sequence } } }`;

export const closeMutation = `mutation CloseSession($a: UUID!, $s: String!, $reason: String!, $handoff: String, $successor: Boolean) {
  actions { closeSession(actionId: $a, id: $s, reason: $reason, handoff: $handoff, successor: $successor) { status reason successor { id } } } }`;

export const editMutation = `mutation EditInput($a: UUID!, $s: String!, $n: Int!, $m: String!) {
  actions { editSessionInput(actionId: $a, id: $s, sequence: $n, message: $m) { sequence } } }`;

export const retrySessionMutation = `mutation RetrySession($a: UUID!, $s: String!) {
  actions { retrySession(actionId: $a, id: $s) { id status } } }`;

export const budgetMutation = `mutation SetBudget($a: UUID!, $s: String!, $max: Float) {
  actions { setSessionBudget(actionId: $a, id: $s, maxUsd: $max) { budget { maxUsd exhausted } } } }`;

export const sendMutation = `mutation Send($a: UUID!, $s: String!, $m: String, $c: SessionControl, $k: String!) {
  actions { sendToSession(actionId: $a, id: $s, message: $m, command: $c, idempotencyKey: $k) { sequence } } }`;

export const deleteMutation = `mutation DeleteInput($a: UUID!, $s: String!, $n: Int!) {
  actions { deleteSessionInput(actionId: $a, id: $s, sequence: $n) { sequence } } }`;

export const promoteMutation = `mutation PromoteInput($a: UUID!, $s: String!, $n: Int!) {
  actions { promoteSessionInput(actionId: $a, id: $s, sequence: $n) { sequence } } }`;

export const archiveMutation = `mutation Archive($a: UUID!, $s: String!) { actions { archiveSession(actionId: $a, id: $s) { archivedAt } } }`;

export const unarchiveMutation = `mutation Unarchive($a: UUID!, $s: String!) { actions { unarchiveSession(actionId: $a, id: $s) { archivedAt } } }`;

export const resumeMutation = `mutation ResumeSession($a: UUID!, $s: String!) {
  actions { resumeSession(actionId: $a, id: $s) { status } } }`;

/** The tool's inputSchema of one pending approval (read when a responder edits the input). */
export const toolSchemaQuery = `query ToolSchema($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
  approvals(status: PENDING) { interruptId toolAction { actionId version definition { tool { inputSchema } } } } } } } }`;

export interface ToolSchemaAnswer {
  actions: {
    action: null | {
      session: null | {
        approvals: { interruptId: string; toolAction: null | { actionId: string; version: number; definition: { tool: null | { inputSchema: unknown } } } }[];
      };
    };
  };
}
