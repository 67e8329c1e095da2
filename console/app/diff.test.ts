import { describe, expect, it } from 'vitest';

import { fold, sideBySide, unified } from './diff';

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

describe('unified (issue 13: the one-column diff of a narrow screen)', () => {
  it('lists each unchanged line once and a change as a removal then an addition', () => {
    expect(unified('a\nb\nc\n', 'a\nB\nc\nd\n')).toEqual([
      { old: 1, new: 1, text: 'a', change: 'same' },
      { old: 2, text: 'b', change: 'removed' },
      { new: 2, text: 'B', change: 'added' },
      { old: 3, new: 3, text: 'c', change: 'same' },
      { new: 4, text: 'd', change: 'added' },
    ]);
  });
});

describe('fold', () => {
  const rows = [...'aaaaaaaaaXaaaaaaaaaa'];
  const changed = (r: string) => r === 'X';
  it('keeps three rows around a change and folds longer unchanged runs', () => {
    const segs = fold(rows, changed);
    expect(segs.map((s) => ('folded' in s ? `fold ${s.folded.length}@${s.from}` : `show ${s.shown.length}@${s.from}`))).toEqual([
      'fold 6@0',
      'show 7@6',
      'fold 7@13',
    ]);
  });
  it('shows a short unchanged run rather than fold it, and folds nothing without a change', () => {
    expect(fold([...'aaXaa'], changed)).toEqual([{ shown: [...'aaXaa'], from: 0 }]);
    expect(fold([...'aaaaaaaaaaa'], changed)).toEqual([{ shown: [...'aaaaaaaaaaa'], from: 0 }]);
    expect(fold([...'XaaaaaaaaaaaX'], changed).map((s) => ('folded' in s ? -s.folded.length : s.shown.length))).toEqual([4, -5, 4]);
  });
});
