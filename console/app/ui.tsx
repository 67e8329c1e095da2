// Small building blocks shared by the screens.
import { createContext, useCallback, useContext, useEffect, useRef, useState, type ReactNode } from 'react';

import type { APIError } from './api';
import { ago, pretty, stamp } from './format';

/** A status as a coloured label (colour is never the only cue: the word is there). */
export function Status({ value, running }: { value: string; running?: boolean }) {
  return (
    <span className={`status status-${value.toLowerCase()}`}>
      {value}
      {running ? <span className="running"> · running</span> : null}
    </span>
  );
}

/** A time as "3 min ago", with the exact time on hover and for screen readers. */
export function When({ iso, now }: { iso: string | null | undefined; now: number }) {
  if (!iso) return <span>—</span>;
  return (
    <time dateTime={iso} title={stamp(iso)}>
      {ago(iso, now)}
    </time>
  );
}

const scalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/**
 * A JSON value rendered readably: an object of plain values as a list of
 * names and values, anything else as indented JSON.
 */
export function Value({ value, label }: { value: unknown; label?: string }) {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length > 0 && entries.length <= 12 && entries.every(([, v]) => scalar(v))) {
      return (
        <dl className="kv" aria-label={label}>
          {entries.map(([k, v]) => (
            <div key={k}>
              <dt>{k}</dt>
              <dd>{typeof v === 'string' ? v : JSON.stringify(v)}</dd>
            </div>
          ))}
        </dl>
      );
    }
  }
  return <Json value={value} label={label} />;
}

/** A JSON value as indented text. */
export function Json({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre className="json" aria-label={label} tabIndex={0}>
      {value === undefined ? '—' : pretty(value)}
    </pre>
  );
}

/** An error from the API, with its code. */
export function Problem({ error, what }: { error: APIError | null; what?: string }) {
  if (!error) return null;
  return (
    <p className="problem" role="alert">
      {what ? `${what}: ` : ''}
      {error.message} {error.code && error.code !== 'NETWORK' ? <code>{error.code}</code> : null}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted" role="status">
      Loading {what}…
    </p>
  );
}

// ---------------------------------------------------------------- notices

export interface Notice {
  id: number;
  text: ReactNode;
  tone: 'info' | 'ok' | 'warn';
}

interface NoticeCtx {
  notices: Notice[];
  notify: (text: ReactNode, tone?: Notice['tone']) => void;
  dismiss: (id: number) => void;
}

const Notices = createContext<NoticeCtx | null>(null);

export function NoticeProvider({ children }: { children: ReactNode }) {
  const [notices, setNotices] = useState<Notice[]>([]);
  const n = useRef(0);
  const dismiss = useCallback((id: number) => setNotices((l) => l.filter((x) => x.id !== id)), []);
  const notify = useCallback(
    (text: ReactNode, tone: Notice['tone'] = 'info') => {
      const id = ++n.current;
      setNotices((l) => [...l.slice(-4), { id, text, tone }]);
    },
    [],
  );
  return <Notices.Provider value={{ notices, notify, dismiss }}>{children}</Notices.Provider>;
}

export function useNotify() {
  const c = useContext(Notices);
  if (!c) throw new Error('useNotify outside NoticeProvider');
  return c.notify;
}

/** The notices, in a polite live region; each stays 20 s or until dismissed. */
export function NoticeArea() {
  const c = useContext(Notices);
  if (!c) return null;
  return (
    <div className="notices" role="status" aria-live="polite">
      {c.notices.map((x) => (
        <NoticeItem key={x.id} notice={x} dismiss={c.dismiss} />
      ))}
    </div>
  );
}

function NoticeItem({ notice, dismiss }: { notice: Notice; dismiss: (id: number) => void }) {
  useEffect(() => {
    const t = setTimeout(() => dismiss(notice.id), 20_000);
    return () => clearTimeout(t);
  }, [notice.id, dismiss]);
  return (
    <div className={`notice notice-${notice.tone}`}>
      <span>{notice.text}</span>
      <button type="button" className="link" onClick={() => dismiss(notice.id)} aria-label="Dismiss this notice">
        ×
      </button>
    </div>
  );
}
