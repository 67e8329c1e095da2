import { describe, expect, it } from 'vitest';

import { conversation, mergeEntries, type Entry } from './transcript';

const at = '2026-01-01T00:00:00Z';
const e = (sequence: number, kind: string, data: unknown): Entry => ({ sequence, kind, data, at });

describe('conversation', () => {
  it('renders an agent turn that waits for an approval', () => {
    const msgs = conversation([
      e(2, 'model_message', { text: 'Freezing.', tool_calls: [{ id: 'c1', name: 'freeze_account', input: { account_id: 'a' } }], stop_reason: 'tool_use' }),
      e(1, 'input', { text: 'Session a, turn 1' }),
      e(3, 'approval_request', { interrupt_id: 'i1', call_id: 'c1', tool: 'freeze_account', tool_version: 1, input: { account_id: 'a' } }),
      e(4, 'outcome', { status: 'WAITING', interrupt_ids: ['i1'] }),
    ]);
    expect(msgs.map((m) => m.type)).toEqual(['user', 'model', 'approval', 'outcome']);
    expect(msgs[1]).toMatchObject({ calls: [{ name: 'freeze_account', id: 'c1' }] });
    expect(msgs[2]).toMatchObject({ interruptId: 'i1', tool: 'freeze_account', toolVersion: 1 });
    expect(msgs[3]).toMatchObject({ status: 'WAITING', waitingOn: ['i1'] });
  });
  it('joins a tool result to its call and shows answers, refusals and notes', () => {
    const msgs = conversation([
      e(1, 'approval_response', { interrupt_id: 'i1', decision: 'APPROVE', reason: 'ok', responder: 'carol', call_id: 'c1', tool: 'freeze_account' }),
      e(2, 'tool_call', { call_id: 'c1', tool: 'freeze_account', input: { account_id: 'a' } }),
      e(3, 'tool_result', { call_id: 'c1', tool: 'freeze_account', content: '{"frozen":"a"}', is_error: false }),
      e(4, 'tool_result', { call_id: 'zz', tool: 'lookup', content: 'boom', is_error: true }),
      e(5, 'refusal', { category: 'fraud', explanation: 'cannot judge' }),
      e(6, 'note', { unfinished: 'no outcome' }),
      e(7, 'echo', { anything: 1 }),
    ]);
    expect(msgs.map((m) => m.type)).toEqual(['answer', 'tool', 'tool', 'refusal', 'note', 'other']);
    expect(msgs[0]).toMatchObject({ decision: 'APPROVE', responder: 'carol', reason: 'ok' });
    expect(msgs[1]).toMatchObject({ tool: 'freeze_account', result: { content: '{"frozen":"a"}', error: false } });
    expect(msgs[2]).toMatchObject({ tool: 'lookup', input: undefined, result: { error: true } });
    expect(msgs[4]).toMatchObject({ text: 'unfinished: no outcome' });
    expect(msgs[5]).toMatchObject({ kind: 'echo', data: { anything: 1 } });
  });
});

describe('conversation (issue 13: held turns and nesting)', () => {
  it('leaves out the empty model message a refusal follows, and keeps one that stops otherwise', () => {
    const held = conversation([
      e(1, 'input', { text: 'turn 1' }),
      e(2, 'model_message', { text: '', tool_calls: null, stop_reason: 'refusal' }),
      e(3, 'refusal', { category: 'fraud', explanation: 'I cannot judge this transfer', text: 'the model declined to continue' }),
    ]);
    expect(held.map((m) => m.type)).toEqual(['user', 'refusal']);
    const cut = conversation([e(1, 'model_message', { text: '', stop_reason: 'max_tokens' }), e(2, 'note', { text: 'nudge' })]);
    expect(cut[0]).toMatchObject({ type: 'model', text: '', calls: [], stop: 'max_tokens' });
    const resumed = conversation([e(1, 'note', { resumed: true, waiting_for: 2 })]);
    expect(resumed[0]).toMatchObject({ text: 'Resumed the paused conversation: 2 calls waited for approval.' });
  });
  it("nests a tool call under this transcript's model message that made it, not one approved from an earlier turn", () => {
    const msgs = conversation([
      e(1, 'approval_response', { interrupt_id: 'i1', decision: 'APPROVE', call_id: 'c0', tool: 'freeze_account' }),
      e(2, 'tool_call', { call_id: 'c0', tool: 'freeze_account', input: {} }),
      e(3, 'tool_result', { call_id: 'c0', tool: 'freeze_account', content: '{}' }),
      e(4, 'model_message', { text: '', tool_calls: [{ id: 'c1', name: 'lookup', input: {} }], stop_reason: 'tool_use' }),
      e(5, 'tool_call', { call_id: 'c1', tool: 'lookup', input: {} }),
      e(6, 'tool_result', { call_id: 'c2', tool: 'other', content: 'x' }),
    ]);
    const tools = msgs.filter((m) => m.type === 'tool');
    expect(tools.map((m) => [m.tool, m.nested])).toEqual([
      ['freeze_account', false],
      ['lookup', true],
      ['other', false],
    ]);
  });
});

describe('mergeEntries', () => {
  it('keeps each sequence once, in order', () => {
    const merged = mergeEntries([e(1, 'input', {}), e(3, 'note', {})], [e(2, 'x', {}), e(3, 'note', { text: 'new' })]);
    expect(merged.map((m) => m.sequence)).toEqual([1, 2, 3]);
    expect(merged[2].data).toEqual({ text: 'new' });
  });
});
