// A dry run compared (issue 15): a proposed definition judged over a range
// of the ledger beside the action's current one (ActionsQuery.dryRun), the
// outcomes of the two side by side. What the action screen's Dry run panel
// sends and how it lines the two answers up; the panel is in
// screens/action.tsx.

export const dryRunQuery = `query DryRun($a: UUID!, $input: ActionInput!, $from: String!, $to: String, $limit: Int) {
  actions { dryRun(actionId: $a, input: $input, from: $from, to: $to, limit: $limit) {
    from to reached events complete sessionCount executions tookMs
    triggers { trigger matched started delivered intakeRecords executions }
    sessions { id input startedAt inputs origin { position eventType } }
    intakeCounts { reason count }
    intakeRecords { trigger reason sessionId message event { position eventType } }
    diagnostics { trigger count lastMessage }
  } } }`;

export interface DryRunTrigger {
  trigger: string;
  matched: number;
  started: number;
  delivered: number;
  intakeRecords: number;
  executions: number;
}

export interface DryRun {
  from: string;
  to: string;
  reached: string;
  events: number;
  complete: boolean;
  sessionCount: number;
  executions: number;
  tookMs: number;
  triggers: DryRunTrigger[];
  sessions: { id: string; input: unknown; startedAt: string; inputs: number; origin: null | { position: string; eventType: string } }[];
  intakeCounts: { reason: string; count: number }[];
  intakeRecords: { trigger: string; reason: string; sessionId: string | null; message: string; event: null | { position: string; eventType: string } }[];
  diagnostics: { trigger: string; count: number; lastMessage: string }[];
}

export interface DryRunAnswer {
  actions: { dryRun: DryRun };
}

/** The server's limit when none is given (ActionsQuery.dryRun). */
export const defaultLimit = 100_000;
export const maxLimit = 500_000;

/** Keys of the definition whose values are JSON scalars: kept as they are, nulls and all. */
const jsonKeys = new Set(['config', 'inputSchema', 'input']);

/**
 * A definition as read (ActionDefinition) turned into what ActionInput
 * takes: the parts that are null left out (the input types take no nulls
 * for most of them), JSON values (config, schemas, start inputs) untouched.
 */
export function definitionInput(def: Record<string, unknown>): Record<string, unknown> {
  const clean = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(clean);
    if (v && typeof v === 'object') {
      return Object.fromEntries(
        Object.entries(v)
          .filter(([, x]) => x !== null && x !== undefined)
          .map(([k, x]) => [k, jsonKeys.has(k) ? x : clean(x)]),
      );
    }
    return v;
  };
  return clean(def) as Record<string, unknown>;
}

/** The line and column (from 1) of offset in text. */
function lineCol(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: before[before.length - 1].length + 1 };
}

/**
 * Where JSON text first goes wrong and what was expected there (JSON.parse's
 * messages differ between browsers and often say neither); null if it is JSON.
 */
export function jsonProblem(text: string): { offset: number; expected: string } | null {
  let i = 0;
  class Stop {
    constructor(readonly expected: string) {}
  }
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const lit = (word: string) => {
    for (const ch of word) {
      if (text[i] !== ch) throw new Stop(`${word}`);
      i++;
    }
  };
  const str = () => {
    i++; // the opening quote
    for (;;) {
      if (i >= text.length) throw new Stop('a closing "');
      const ch = text[i];
      if (ch === '"') {
        i++;
        return;
      }
      if (ch < ' ') throw new Stop(ch === '\n' ? 'a closing " before the line ends' : 'a closing " or an escape (a string holds no raw control character)');
      if (ch === '\\') {
        i++;
        const e = text[i];
        if (e === 'u') {
          for (let k = 1; k <= 4; k++) if (!/[0-9a-fA-F]/.test(text[i + k] ?? '')) throw new Stop('four hex digits after \\u');
          i += 5;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i++;
        else throw new Stop('an escape: \\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u');
      } else i++;
    }
  };
  const num = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m || !m[0] || m[0] === '-') throw new Stop('a value');
    i += m[0].length;
  };
  const value = (): void => {
    ws();
    const ch = text[i];
    if (ch === '{') {
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') throw new Stop('a property name in double quotes');
        str();
        ws();
        if (text[i] !== ':') throw new Stop("':' after the property name");
        i++;
        value();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        throw new Stop("',' or '}' after the property value");
      }
    }
    if (ch === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (;;) {
        value();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        throw new Stop("',' or ']' after the element");
      }
    }
    if (ch === '"') return str();
    if (ch === 't') return lit('true');
    if (ch === 'f') return lit('false');
    if (ch === 'n') return lit('null');
    if (ch === '-' || (ch >= '0' && ch <= '9')) return num();
    throw new Stop('a value');
  };
  try {
    value();
    ws();
    if (i < text.length) throw new Stop('nothing more after the value');
    return null;
  } catch (err) {
    if (err instanceof Stop) return { offset: i, expected: err.expected };
    throw err;
  }
}

export type Parsed = { ok: true; value: Record<string, unknown> } | { ok: false; message: string };

/** The proposed definition's text parsed: a JSON object, or why it is not one and where. */
export function parseDefinition(text: string): Parsed {
  if (!text.trim()) return { ok: false, message: 'The proposed definition is empty: give an ActionInput as a JSON object.' };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const p = jsonProblem(text);
    if (!p) return { ok: false, message: `The proposed definition is not valid JSON: ${(err as Error).message}` };
    const { line, column } = lineCol(text, p.offset);
    const found = p.offset >= text.length ? 'the text ends' : `found ${JSON.stringify(text[p.offset])}`;
    return { ok: false, message: `The proposed definition is not valid JSON: at line ${line}, column ${column} it expected ${p.expected}, ${found}.` };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, message: 'The proposed definition must be a JSON object (the ActionInput shape: name, kind, triggers, session…).' };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

export interface RangeForm {
  from: string;
  to: string;
  limit: string;
}

export interface Range {
  from: string;
  to: string | null;
  limit: number | null;
}

/** Which field of the form is wrong, and why. */
export interface FieldProblem {
  field: 'from' | 'to' | 'limit';
  message: string;
}

const position = /^[1-9]\d*$/;

/** The range of the form, or what is wrong with it (the server checks it again). */
export function parseRange(f: RangeForm): { ok: true; range: Range } | { ok: false; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const from = f.from.trim();
  const to = f.to.trim();
  const limit = f.limit.trim();
  if (!position.test(from)) problems.push({ field: 'from', message: 'From position must be a ledger position: a whole number from 1.' });
  if (to && !position.test(to)) problems.push({ field: 'to', message: 'To position must be a ledger position (a whole number from 1), or empty for the ledger head.' });
  if (position.test(from) && position.test(to) && BigInt(to) < BigInt(from)) {
    problems.push({ field: 'to', message: 'To position must not come before From position.' });
  }
  if (limit && (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > maxLimit)) {
    problems.push({ field: 'limit', message: `Limit must be a number of events from 1 to ${maxLimit.toLocaleString('en')}, or empty for ${defaultLimit.toLocaleString('en')}.` });
  }
  if (problems.length) return { ok: false, problems };
  return { ok: true, range: { from, to: to || null, limit: limit ? Number(limit) : null } };
}

export const triggerCounts = ['matched', 'started', 'delivered', 'intakeRecords', 'executions'] as const;
export type TriggerCount = (typeof triggerCounts)[number];

/** One trigger name of either run, with its counts in each (null: the run's definition has no such trigger). */
export interface TriggerRow {
  trigger: string;
  current: DryRunTrigger | null;
  proposed: DryRunTrigger | null;
}

/** The triggers of both runs, by name: the proposed definition's order, then the current one's triggers it dropped. */
export function compareTriggers(current: DryRun | null, proposed: DryRun): TriggerRow[] {
  const cur = new Map((current?.triggers ?? []).map((t) => [t.trigger, t]));
  const rows: TriggerRow[] = proposed.triggers.map((t) => ({ trigger: t.trigger, current: cur.get(t.trigger) ?? null, proposed: t }));
  const seen = new Set(proposed.triggers.map((t) => t.trigger));
  for (const t of current?.triggers ?? []) if (!seen.has(t.trigger)) rows.push({ trigger: t.trigger, current: t, proposed: null });
  return rows;
}

/** Intake counts of both runs by reason (0 where a run left none): the reasons in order of their first appearance, current first. */
export function compareIntake(current: DryRun | null, proposed: DryRun): { reason: string; current: number | null; proposed: number }[] {
  const reasons: string[] = [];
  for (const x of [...(current?.intakeCounts ?? []), ...proposed.intakeCounts]) if (!reasons.includes(x.reason)) reasons.push(x.reason);
  const count = (r: DryRun, reason: string) => r.intakeCounts.find((x) => x.reason === reason)?.count ?? 0;
  return reasons.map((reason) => ({ reason, current: current ? count(current, reason) : null, proposed: count(proposed, reason) }));
}

/**
 * Why a run did not read its whole range, in a sentence; null when it did.
 * The limit (the one given, else the server's default) cut it short when
 * it read that many events; otherwise the ledger ended before `to`.
 */
export function shortOf(run: DryRun, limit: number | null): string | null {
  if (run.complete) return null;
  const cap = limit ?? defaultLimit;
  if (run.events >= cap) {
    return `The limit of ${cap.toLocaleString('en')} events cut the range short: it stopped at position ${run.reached}, not ${run.to}.`;
  }
  return `The range was not read to its end: it stopped at position ${run.reached}, not ${run.to} (the ledger ends there).`;
}

/** A GraphQL error's field as the form shows it: variables.input.x is the proposed definition's input.x. */
export const fieldName = (field: string | undefined): string | undefined => field?.replace(/^variables\./, '');

/** Which part of the form a field of an error names: the definition, one of the range's inputs, or none. */
export function fieldPart(field: string | undefined): 'definition' | 'from' | 'to' | 'limit' | null {
  const f = fieldName(field);
  if (!f) return null;
  if (f === 'input' || f.startsWith('input.') || f.startsWith('input[')) return 'definition';
  if (f === 'from' || f === 'to' || f === 'limit') return f;
  return null;
}
