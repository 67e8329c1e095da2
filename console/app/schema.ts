// Checks a replacement input against a tool's inputSchema before it is
// sent (issue 13), with @cfworker/json-schema: it interprets schemas
// rather than compiling them to code, so it runs under the console's
// Content-Security-Policy, which allows no eval (Ajv compiles with
// new Function and would be refused).
//
// The server's check (package inputschema) reads draft 2020-12 unless
// $schema names another draft, and treats `format` as an annotation, not
// an assertion; so does this one.
import { Validator, type Schema, type SchemaDraft } from '@cfworker/json-schema';

/** One reason an input does not match: where (a JSON pointer) and why. */
export interface Problem {
  at: string;
  message: string;
}

/** The result of checking a text: the parsed value, or what is wrong. */
export type Checked = { ok: true; value: unknown } | { ok: false; problems: Problem[] };

const drafts: [RegExp, SchemaDraft][] = [
  [/draft-04/, '4'],
  [/draft-07/, '7'],
  [/2019-09/, '2019-09'],
  [/2020-12/, '2020-12'],
];

function draftOf(schema: unknown): SchemaDraft {
  const uri = schema && typeof schema === 'object' ? (schema as { $schema?: unknown }).$schema : undefined;
  if (typeof uri === 'string') {
    for (const [re, d] of drafts) if (re.test(uri)) return d;
  }
  return '2020-12';
}

/** schema without its `format` assertions (a copy; keys in schema positions only). */
function withoutFormat(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutFormat);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'format' && typeof v === 'string') continue;
    if (k === 'const' || k === 'enum' || k === 'default' || k === 'examples') out[k] = v;
    else out[k] = withoutFormat(v);
  }
  return out;
}

/**
 * check parses text as JSON and checks it against schema (null or
 * undefined: any JSON object). The server takes an object only.
 */
export function check(text: string, schema: unknown): Checked {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, problems: [{ at: '', message: `not JSON: ${(err as Error).message}` }] };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, problems: [{ at: '', message: 'the input must be a JSON object' }] };
  }
  if (schema === null || schema === undefined) return { ok: true, value };
  let validator: Validator;
  try {
    validator = new Validator(withoutFormat(schema) as Schema | boolean, draftOf(schema), false);
  } catch (err) {
    return { ok: false, problems: [{ at: '', message: `the tool's inputSchema cannot be read: ${(err as Error).message}` }] };
  }
  const res = validator.validate(value);
  if (res.valid) return { ok: true, value };
  // The validator reports each failing keyword and the keywords around it
  // ("properties", "allOf", ...): keep the innermost, each once.
  const seen = new Set<string>();
  const problems: Problem[] = [];
  for (const u of res.errors) {
    if (res.errors.some((o) => o !== u && o.keywordLocation.startsWith(`${u.keywordLocation}/`))) continue;
    const at = u.instanceLocation.replace(/^#/, '') || '/';
    const key = `${at}\u0000${u.error}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push({ at, message: u.error });
  }
  return { ok: false, problems };
}
