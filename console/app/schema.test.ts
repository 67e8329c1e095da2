import { describe, expect, it } from 'vitest';

import { check } from './schema';

const schema = {
  type: 'object',
  required: ['account_id'],
  properties: { account_id: { type: 'string', format: 'uuid' }, amount: { type: 'number', minimum: 0 } },
  additionalProperties: false,
};

describe('check', () => {
  it('accepts an input that matches', () => {
    expect(check('{"account_id": "3f0c9f8e", "amount": 12}', schema)).toEqual({ ok: true, value: { account_id: '3f0c9f8e', amount: 12 } });
  });
  it('treats format as an annotation, as the server does', () => {
    expect(check('{"account_id": "not a uuid"}', schema).ok).toBe(true);
  });
  it('names what is wrong, innermost only', () => {
    const r = check('{"amount": -1, "extra": true}', schema);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const text = r.problems.map((p) => `${p.at} ${p.message}`).join('\n');
    expect(text).toMatch(/account_id/);
    expect(text).toMatch(/\/amount/);
    expect(text).toMatch(/extra/);
    expect(r.problems.every((p) => !/properties/.test(p.message) || /extra|account_id/.test(p.message))).toBe(true);
  });
  it('refuses text that is not JSON, and non-objects', () => {
    expect(check('{"account_id": ', schema)).toMatchObject({ ok: false, problems: [{ message: expect.stringMatching(/^not JSON/) }] });
    expect(check('[1]', null)).toMatchObject({ ok: false, problems: [{ message: 'the input must be a JSON object' }] });
    expect(check('{"x": 1}', null)).toEqual({ ok: true, value: { x: 1 } });
  });
  it('reads the draft from $schema', () => {
    const d4 = { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object', properties: { n: { type: 'integer', maximum: 3, exclusiveMaximum: true } } };
    expect(check('{"n": 3}', d4).ok).toBe(false);
    expect(check('{"n": 2}', d4).ok).toBe(true);
  });
  it('keeps "format" where it is data, not a keyword', () => {
    const s = { type: 'object', properties: { format: { enum: ['pdf'] } }, required: ['format'] };
    expect(check('{"format": "doc"}', s).ok).toBe(false);
    expect(check('{"format": "pdf"}', s).ok).toBe(true);
  });
});
