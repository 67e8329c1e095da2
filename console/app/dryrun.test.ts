import { describe, expect, it } from 'vitest';

import { compareIntake, compareTriggers, definitionInput, fieldPart, jsonProblem, parseDefinition, parseRange, shortOf, type DryRun } from './dryrun';

const run = (over: Partial<DryRun>): DryRun => ({
  from: '1',
  to: '12',
  reached: '12',
  events: 12,
  complete: true,
  sessionCount: 0,
  executions: 0,
  tookMs: 5,
  triggers: [],
  sessions: [],
  intakeCounts: [],
  intakeRecords: [],
  diagnostics: [],
  ...over,
});

const t = (trigger: string, matched: number) => ({ trigger, matched, started: 0, delivered: 0, intakeRecords: 0, executions: 0 });

describe('definitionInput', () => {
  it('leaves out null parts but keeps JSON values whole', () => {
    const def = {
      name: 'm',
      kind: 'agent',
      source: null,
      config: { temperature: null, system: 'x' },
      triggers: [{ name: 'a', event: 'true', schedule: null, session: { start: { input: { id: 'event.id' } }, resume: null } }],
      session: { id: 'session.input.id', inputSchema: { type: 'object', default: null }, ends: null },
      tool: null,
    };
    expect(definitionInput(def)).toEqual({
      name: 'm',
      kind: 'agent',
      config: { temperature: null, system: 'x' },
      triggers: [{ name: 'a', event: 'true', session: { start: { input: { id: 'event.id' } } } }],
      session: { id: 'session.input.id', inputSchema: { type: 'object', default: null } },
    });
  });
});

describe('parseDefinition', () => {
  it('takes a JSON object', () => {
    expect(parseDefinition('{"name": "m", "kind": "agent.echo"}')).toEqual({ ok: true, value: { name: 'm', kind: 'agent.echo' } });
  });
  it('says where the JSON breaks, and refuses what is not an object', () => {
    const bad = parseDefinition('{\n  "name": "m",\n  "kind": \n}');
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.message).toBe('The proposed definition is not valid JSON: at line 4, column 1 it expected a value, found "}".');
    expect(parseDefinition('[1]').ok).toBe(false);
    expect(parseDefinition('null').ok).toBe(false);
    expect(parseDefinition('  ').ok).toBe(false);
  });
});

describe('jsonProblem', () => {
  it('finds where JSON goes wrong', () => {
    expect(jsonProblem('{"a": [1, 2, {"b": null}], "c": "x\\n\\u00e9", "d": -1.5e3, "e": true}')).toBeNull();
    expect(jsonProblem('{"a": 1,}')).toEqual({ offset: 8, expected: 'a property name in double quotes' });
    expect(jsonProblem("{'a': 1}")).toEqual({ offset: 1, expected: 'a property name in double quotes' });
    expect(jsonProblem('{"a": 1 "b": 2}')).toEqual({ offset: 8, expected: "',' or '}' after the property value" });
    expect(jsonProblem('{"a": [1 2]}')).toEqual({ offset: 9, expected: "',' or ']' after the element" });
    expect(jsonProblem('{"a": "x\n"}')).toEqual({ offset: 8, expected: 'a closing " before the line ends' });
    expect(jsonProblem('{"a": tru}')).toEqual({ offset: 9, expected: 'true' });
    expect(jsonProblem('{"a": 1')).toEqual({ offset: 7, expected: "',' or '}' after the property value" });
    expect(jsonProblem('{} x')).toEqual({ offset: 3, expected: 'nothing more after the value' });
  });
  it('agrees with JSON.parse on what is JSON', () => {
    for (const t of ['1', '"x"', '[]', '{}', ' null ', '0', '-0.5', '1e5', '"\\"', '01', '1.', '.5', '+1', '"\\x"', '[1,]', '{"a"}', 'nul', '"']) {
      let ok = true;
      try {
        JSON.parse(t);
      } catch {
        ok = false;
      }
      expect(jsonProblem(t) === null, t).toBe(ok);
    }
  });
});

describe('parseRange', () => {
  it('takes positions and an optional limit', () => {
    expect(parseRange({ from: ' 1 ', to: '', limit: '' })).toEqual({ ok: true, range: { from: '1', to: null, limit: null } });
    expect(parseRange({ from: '5', to: '900000000000000000001', limit: '200' })).toEqual({
      ok: true,
      range: { from: '5', to: '900000000000000000001', limit: 200 },
    });
  });
  it('names the field that is wrong', () => {
    const r = parseRange({ from: '0', to: 'x', limit: '600000' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.map((p) => p.field)).toEqual(['from', 'to', 'limit']);
    const back = parseRange({ from: '10', to: '9', limit: '' });
    expect(!back.ok && back.problems.map((p) => p.field)).toEqual(['to']);
  });
});

describe('compareTriggers', () => {
  it("lists the proposed triggers in order, then the current one's it dropped", () => {
    const rows = compareTriggers(run({ triggers: [t('a', 1), t('gone', 2)] }), run({ triggers: [t('b', 3), t('a', 4)] }));
    expect(rows.map((r) => [r.trigger, r.current?.matched ?? null, r.proposed?.matched ?? null])).toEqual([
      ['b', null, 3],
      ['a', 1, 4],
      ['gone', 2, null],
    ]);
  });
  it('works without the current run', () => {
    expect(compareTriggers(null, run({ triggers: [t('a', 1)] }))).toEqual([{ trigger: 'a', current: null, proposed: t('a', 1) }]);
  });
});

describe('compareIntake', () => {
  it('counts each reason of either run, 0 where a run left none', () => {
    const cur = run({ intakeCounts: [{ reason: 'session_not_found', count: 3 }] });
    const next = run({ intakeCounts: [{ reason: 'input_invalid', count: 1 }, { reason: 'session_not_found', count: 1 }] });
    expect(compareIntake(cur, next)).toEqual([
      { reason: 'session_not_found', current: 3, proposed: 1 },
      { reason: 'input_invalid', current: 0, proposed: 1 },
    ]);
    expect(compareIntake(null, next)[0].current).toBeNull();
  });
});

describe('shortOf', () => {
  it('says the limit cut the range short, or that the ledger ended', () => {
    expect(shortOf(run({}), null)).toBeNull();
    expect(shortOf(run({ complete: false, reached: '4', events: 4 }), 4)).toBe('The limit of 4 events cut the range short: it stopped at position 4, not 12.');
    expect(shortOf(run({ complete: false, to: '999', reached: '12', events: 12 }), null)).toMatch(/stopped at position 12, not 999 \(the ledger ends there\)/);
  });
});

describe('fieldPart', () => {
  it('maps an error field to the part of the form', () => {
    expect(fieldPart('input.triggers[0].event')).toBe('definition');
    expect(fieldPart('variables.input.bogus')).toBe('definition');
    expect(fieldPart('from')).toBe('from');
    expect(fieldPart('limit')).toBe('limit');
    expect(fieldPart(undefined)).toBeNull();
    expect(fieldPart('actionId')).toBeNull();
  });
});
