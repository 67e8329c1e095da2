// A turn's transcript as a conversation (issue 13): the agent kind writes
// input, model_message, tool_call, tool_result, approval_request,
// approval_response, note, refusal and outcome entries (handlers/agent);
// other kinds write entries of their own, shown as they are.

export interface Entry {
  sequence: number;
  kind: string;
  data: unknown;
  at: string;
}

type Obj = Record<string, unknown>;

export interface ToolCall {
  name: string;
  id?: string;
  input: unknown;
}

/** One line of the conversation. */
export type Message =
  | { type: 'user'; seq: number; at: string; text: string }
  | { type: 'model'; seq: number; at: string; text: string; calls: ToolCall[]; stop?: string }
  | { type: 'tool'; seq: number; at: string; tool: string; callId?: string; input: unknown; via?: string; result?: { content: unknown; error: boolean }; nested: boolean }
  | { type: 'approval'; seq: number; at: string; tool: string; interruptId: string; input: unknown; toolVersion?: number }
  | { type: 'answer'; seq: number; at: string; tool?: string; interruptId: string; decision: string; reason?: string; responder?: string; input?: unknown; ignored?: string }
  | { type: 'refusal'; seq: number; at: string; category?: string; explanation?: string; text?: string }
  | { type: 'note'; seq: number; at: string; text: string; data: unknown }
  | { type: 'outcome'; seq: number; at: string; status: string; reason?: string; state: unknown; waitingOn?: string[] }
  | { type: 'other'; seq: number; at: string; kind: string; data: unknown };

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});

function calls(v: unknown): ToolCall[] {
  if (!Array.isArray(v)) return [];
  return v.map((c) => {
    const o = obj(c);
    return { name: str(o.name) ?? str(o.Name) ?? '?', id: str(o.id) ?? str(o.ID), input: o.input ?? o.Input ?? null };
  });
}

function noteText(d: Obj): string {
  if (typeof d.text === 'string') return d.text;
  if (typeof d.unfinished === 'string') return `unfinished: ${d.unfinished}`;
  if (typeof d.error === 'string') return `error: ${d.error}`;
  if (d.resumed) {
    const n = Number(d.waiting_for ?? 0);
    return `Resumed the paused conversation: ${n} ${n === 1 ? 'call' : 'calls'} waited for approval.`;
  }
  if (d.ignored_calls) return `ignored calls: ${String(d.why ?? '')}`;
  return JSON.stringify(d);
}

/**
 * conversation turns entries (in sequence order) into messages. A
 * tool_result joins the tool_call with its call_id, when there is one. A
 * tool call is nested under the model message of this transcript that made
 * it; one the model made in an earlier turn (run after its approval) is
 * not. A model message with neither text nor calls that a refusal follows
 * is left out: the refusal says what the model said.
 */
export function conversation(entries: Entry[]): Message[] {
  const out: Message[] = [];
  const open = new Map<string, Extract<Message, { type: 'tool' }>>();
  const asked = new Set<string>(); // call ids of this transcript's model messages
  const sorted = [...entries].sort((a, b) => a.sequence - b.sequence);
  for (const [i, e] of sorted.entries()) {
    const d = obj(e.data);
    const base = { seq: e.sequence, at: e.at };
    switch (e.kind) {
      case 'input':
        out.push({ ...base, type: 'user', text: str(d.text) ?? JSON.stringify(e.data) });
        break;
      case 'model_message': {
        const m: Extract<Message, { type: 'model' }> = { ...base, type: 'model', text: str(d.text) ?? '', calls: calls(d.tool_calls), stop: str(d.stop_reason) };
        for (const c of m.calls) if (c.id) asked.add(c.id);
        if (!m.text && m.calls.length === 0 && sorted[i + 1]?.kind === 'refusal') break;
        out.push(m);
        break;
      }
      case 'tool_call': {
        const m: Extract<Message, { type: 'tool' }> = {
          ...base,
          type: 'tool',
          tool: str(d.tool) ?? '?',
          callId: str(d.call_id),
          input: d.input ?? null,
          via: str(d.via),
          nested: !!str(d.call_id) && asked.has(str(d.call_id)!),
        };
        out.push(m);
        if (m.callId) open.set(m.callId, m);
        break;
      }
      case 'tool_result': {
        const id = str(d.call_id);
        const m = id ? open.get(id) : undefined;
        const result = { content: d.content ?? null, error: d.is_error === true };
        if (m && !m.result) m.result = result;
        else out.push({ ...base, type: 'tool', tool: str(d.tool) ?? '?', callId: id, input: undefined, result, nested: !!id && asked.has(id) });
        break;
      }
      case 'approval_request':
        out.push({
          ...base,
          type: 'approval',
          tool: str(d.tool) ?? '?',
          interruptId: str(d.interrupt_id) ?? '',
          input: d.input ?? null,
          toolVersion: typeof d.tool_version === 'number' ? d.tool_version : undefined,
        });
        break;
      case 'approval_response':
        out.push({
          ...base,
          type: 'answer',
          tool: str(d.tool),
          interruptId: str(d.interrupt_id) ?? '',
          decision: str(d.decision) ?? '?',
          reason: str(d.reason) || undefined,
          responder: str(d.responder),
          input: d.input,
          ignored: str(d.ignored),
        });
        break;
      case 'refusal':
        out.push({ ...base, type: 'refusal', category: str(d.category), explanation: str(d.explanation), text: str(d.text) });
        break;
      case 'note':
        out.push({ ...base, type: 'note', text: noteText(d), data: e.data });
        break;
      case 'outcome':
        out.push({
          ...base,
          type: 'outcome',
          status: str(d.status) ?? '?',
          reason: str(d.reason) || undefined,
          state: d.state ?? null,
          waitingOn: Array.isArray(d.interrupt_ids) ? d.interrupt_ids.map(String) : undefined,
        });
        break;
      default:
        out.push({ ...base, type: 'other', kind: e.kind, data: e.data });
    }
  }
  return out;
}

/** Merge live entries into a list by sequence (a later copy wins). */
export function mergeEntries(have: Entry[], more: Entry[]): Entry[] {
  const by = new Map<number, Entry>();
  for (const e of have) by.set(e.sequence, e);
  for (const e of more) by.set(e.sequence, e);
  return [...by.values()].sort((a, b) => a.sequence - b.sequence);
}
