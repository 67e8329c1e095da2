// Times and durations as a responder reads them.

/** "45 s", "3 min", "2 h 5 min", "3 d 4 h" for a span in milliseconds. */
export function span(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** How long ago iso was at now: "3 min ago" (or "in 3 min" for a future time). */
export function ago(iso: string, now: number): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return t > now + 1000 ? `in ${span(t - now)}` : `${span(now - t)} ago`;
}

/**
 * How long something raised at iso has waited at now: "waiting for 3 min",
 * or "just raised" under a second (or when the browser's clock is behind).
 */
export function waitingFor(iso: string, now: number): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return `waiting since ${iso}`;
  return now - t < 1000 ? 'just raised' : `waiting for ${span(now - t)}`;
}

/** An RFC 3339 time as "2026-01-02 09:00:00 UTC". */
export function stamp(iso: string | null | undefined): string {
  if (!iso) return '—';
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  return `${t.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A turn's duration from its start and finish (or now while it runs). */
export function took(startedAt: string, finishedAt: string | null | undefined, now: number): string {
  const a = Date.parse(startedAt);
  const b = finishedAt ? Date.parse(finishedAt) : now;
  if (Number.isNaN(a) || Number.isNaN(b)) return '';
  const ms = b - a;
  return ms < 1000 ? `${ms} ms` : span(ms);
}

/** A JSON value as indented text. */
export const pretty = (v: unknown): string => (v === undefined ? '' : JSON.stringify(v, null, 2));
