import { describe, expect, it } from 'vitest';

import { ago, span, stamp, took, waitingFor } from './format';

describe('format', () => {
  it('spans', () => {
    expect(span(999)).toBe('0 s');
    expect(span(45_000)).toBe('45 s');
    expect(span(3 * 60_000 + 5_000)).toBe('3 min');
    expect(span(2 * 3_600_000 + 5 * 60_000)).toBe('2 h 5 min');
    expect(span(3 * 86_400_000 + 4 * 3_600_000)).toBe('3 d 4 h');
    expect(span(-5)).toBe('0 s');
  });
  it('ago and stamp', () => {
    const now = Date.parse('2026-01-02T10:00:00Z');
    expect(ago('2026-01-02T09:58:00Z', now)).toBe('2 min ago');
    expect(ago('2026-01-02T11:00:00Z', now)).toBe('in 1 h');
    expect(stamp('2026-01-02T09:00:00.123456Z')).toBe('2026-01-02 09:00:00 UTC');
    expect(stamp(null)).toBe('—');
    expect(took('2026-01-02T09:00:00Z', '2026-01-02T09:00:00.250Z', now)).toBe('250 ms');
  });
  it('waiting for (issue 13: how long an interrupt has waited)', () => {
    const now = Date.parse('2026-03-02T09:03:20Z');
    expect(waitingFor('2026-03-02T09:00:00Z', now)).toBe('waiting for 3 min');
    expect(waitingFor('2026-03-01T07:00:00Z', now)).toBe('waiting for 1 d 2 h');
    expect(waitingFor('2026-03-02T09:03:19.500Z', now)).toBe('just raised');
    expect(waitingFor('2026-03-02T09:05:00Z', now)).toBe('just raised');
  });
});
