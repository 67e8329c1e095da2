// Two versions of a definition compared (issue 13), using jsdiff: side by
// side (the lines of each paired up, changed lines marked) for a wide
// screen, one column (a unified diff) for a narrow one, and long runs of
// unchanged lines folded away in either.
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

/** One line of the one-column view: in the old text (old), the new (new), or both. */
export interface Line {
  old?: number;
  new?: number;
  text: string;
  change: 'same' | 'removed' | 'added';
}

/** unified lists the lines of a and b in one column: each unchanged line once, removals before their additions. */
export function unified(a: string, b: string): Line[] {
  const out: Line[] = [];
  let on = 0;
  let nn = 0;
  for (const part of diffLines(a, b)) {
    for (const text of lines(part.value)) {
      if (part.removed) out.push({ old: ++on, text, change: 'removed' });
      else if (part.added) out.push({ new: ++nn, text, change: 'added' });
      else out.push({ old: ++on, new: ++nn, text, change: 'same' });
    }
  }
  return out;
}

/** A run of rows shown, or a run of unchanged rows folded away. */
export type Segment<T> = { shown: T[]; from: number } | { folded: T[]; from: number };

/**
 * fold keeps the rows within context rows of a change and folds each
 * longer run of unchanged rows (at least minFold of them) into one segment.
 * Without any change nothing is folded. from is each segment's first index.
 */
export function fold<T>(rows: T[], changed: (r: T) => boolean, context = 3, minFold = 4): Segment<T>[] {
  const near = rows.map(() => false);
  let any = false;
  rows.forEach((r, i) => {
    if (!changed(r)) return;
    any = true;
    for (let j = Math.max(0, i - context); j <= Math.min(rows.length - 1, i + context); j++) near[j] = true;
  });
  if (!any) return rows.length ? [{ shown: rows, from: 0 }] : [];
  const out: Segment<T>[] = [];
  let i = 0;
  while (i < rows.length) {
    let j = i;
    while (j < rows.length && near[j] === near[i]) j++;
    const run = rows.slice(i, j);
    const last = out[out.length - 1];
    if (!near[i] && run.length >= minFold) out.push({ folded: run, from: i });
    else if (last && 'shown' in last) last.shown.push(...run);
    else out.push({ shown: run, from: i });
    i = j;
  }
  return out;
}
