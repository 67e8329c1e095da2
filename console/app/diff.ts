// Two versions of a definition side by side (issue 13): the lines of each
// (indented JSON) paired up, changed lines marked, using jsdiff.
import { diffLines } from 'diff';

export interface Side {
  n: number;
  text: string;
  change: 'same' | 'removed' | 'added';
}

/** One row of the side-by-side view: a line of the left, of the right, or both. */
export interface Row {
  left?: Side;
  right?: Side;
}

const lines = (v: string): string[] => {
  const l = v.split('\n');
  if (l[l.length - 1] === '') l.pop();
  return l;
};

/** sideBySide pairs the lines of a and b; removed lines face added ones where they can. */
export function sideBySide(a: string, b: string): Row[] {
  const rows: Row[] = [];
  let ln = 0;
  let rn = 0;
  let removed: string[] = [];
  const flush = (added: string[]) => {
    const n = Math.max(removed.length, added.length);
    for (let i = 0; i < n; i++) {
      rows.push({
        left: i < removed.length ? { n: ++ln, text: removed[i], change: 'removed' } : undefined,
        right: i < added.length ? { n: ++rn, text: added[i], change: 'added' } : undefined,
      });
    }
    removed = [];
  };
  for (const part of diffLines(a, b)) {
    const ls = lines(part.value);
    if (part.removed) {
      removed.push(...ls);
    } else if (part.added) {
      flush(ls);
    } else {
      flush([]);
      for (const t of ls) rows.push({ left: { n: ++ln, text: t, change: 'same' }, right: { n: ++rn, text: t, change: 'same' } });
    }
  }
  flush([]);
  return rows;
}
