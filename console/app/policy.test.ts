import { describe, expect, it } from 'vitest';

import { abilities, actionResource, allows, readableActions, type Viewer } from './policy';

const A = '4f1c2a7e-9b3d-4e6f-8a21-5c7d9e0b1f34';
const B = '0b1f345c-7d9e-4e6f-8a21-4f1c2a7e9b3d';
const viewer = (...policies: [Viewer['policies'][number]['action'], string][]): Viewer => ({
  id: 'p',
  dev: false,
  policies: policies.map(([action, resource]) => ({ action, resource })),
});

// The cases of auth/auth_test.go's table, as the console reads them.
describe('allows', () => {
  it('lets dev mode do everything and nobody nothing', () => {
    expect(allows({ id: 'dev', dev: true, policies: [] }, 'ADMIN', '*')).toBe(true);
    expect(allows(null, 'READ', actionResource(A))).toBe(false);
    expect(allows(viewer(), 'READ', actionResource(A))).toBe(false);
  });
  it('covers narrower resources', () => {
    const v = viewer(['READ', 'financial.Action.document'], ['WRITE', 'ledger']);
    expect(allows(v, 'READ', actionResource(A))).toBe(true);
    expect(allows(v, 'READ', 'financial.Action.document')).toBe(true);
    expect(allows(v, 'RESPOND', actionResource(A))).toBe(false);
    expect(allows(v, 'WRITE', 'ledger:account')).toBe(true);
    expect(allows(v, 'READ', 'ledger')).toBe(false);
    expect(allows(viewer(['READ', '*']), 'READ', 'ledger:x')).toBe(true);
  });
  it('implies: ADMIN everything, WRITE covers CALL, nothing else', () => {
    const v = viewer(['ADMIN', actionResource(A)], ['WRITE', actionResource(B)]);
    for (const act of ['READ', 'WRITE', 'RESPOND', 'CLOSE', 'CALL'] as const) {
      expect(allows(v, act, actionResource(A))).toBe(true);
    }
    expect(allows(v, 'CALL', actionResource(B))).toBe(true);
    expect(allows(v, 'READ', actionResource(B))).toBe(false);
    expect(allows(v, 'READ', 'financial.Action.document')).toBe(false);
  });
  it('does not let one action cover another', () => {
    expect(allows(viewer(['RESPOND', actionResource(A)]), 'RESPOND', actionResource(B))).toBe(false);
  });
});

describe('readableActions', () => {
  it('lists the actions a responder may read', () => {
    const v = viewer(['READ', actionResource(A)], ['RESPOND', actionResource(A)], ['ADMIN', actionResource(B)], ['READ', 'ledger']);
    expect(readableActions(v)).toEqual([A, B]);
    expect(readableActions(viewer(['READ', '*']))).toBe('all');
    expect(readableActions(viewer(['RESPOND', actionResource(A)]))).toEqual([]);
  });
});

describe('abilities', () => {
  it('turns policies into what the console shows', () => {
    const ab = abilities(viewer(['READ', actionResource(A)], ['RESPOND', actionResource(A)]));
    expect(ab.listActions).toBe(false);
    expect(ab.readLedger).toBe(false);
    expect(ab.respond(A)).toBe(true);
    expect(ab.close(A)).toBe(false);
    expect(ab.readAction(B)).toBe(false);
    expect(ab.write(A)).toBe(false);
    expect(abilities(viewer(['ADMIN', actionResource(A)])).write(A)).toBe(true);
  });
});
