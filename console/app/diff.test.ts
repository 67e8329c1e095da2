import { describe, expect, it } from 'vitest';

import { sideBySide } from './diff';

describe('sideBySide', () => {
  it('pairs a changed line with its replacement and numbers each side', () => {
    const rows = sideBySide('a\nb\nc\n', 'a\nB\nc\nd\n');
    expect(rows).toEqual([
      { left: { n: 1, text: 'a', change: 'same' }, right: { n: 1, text: 'a', change: 'same' } },
      { left: { n: 2, text: 'b', change: 'removed' }, right: { n: 2, text: 'B', change: 'added' } },
      { left: { n: 3, text: 'c', change: 'same' }, right: { n: 3, text: 'c', change: 'same' } },
      { left: undefined, right: { n: 4, text: 'd', change: 'added' } },
    ]);
  });
  it('shows removals alone', () => {
    const rows = sideBySide('x\ny\n', 'x\n');
    expect(rows[1]).toEqual({ left: { n: 2, text: 'y', change: 'removed' }, right: undefined });
  });
  it('is all "same" for equal texts', () => {
    expect(sideBySide('{\n}', '{\n}').every((r) => r.left?.change === 'same')).toBe(true);
  });
});
