// Answering one interrupt (an approval request or a held turn), shared by
// the inbox and the session page: approve or deny with a reason, approve
// with a replacement input checked against the tool's inputSchema before
// it is sent, retry a held turn with a note, or skip it when that is
// allowed (the reason shown when it is not). Approving is offered as the
// server's mayApprove and mayReplaceInput say (issue 11: a tool's owner
// may require RESPOND on the tool, a replacement needs CALL on it).
import { useId, useMemo, useState } from 'react';

import { APIError, request } from './api';
import { pretty } from './format';
import { respondMutation, toolSchemaQuery, type InboxItem, type ToolSchemaAnswer } from './queries';
import { check } from './schema';
import { useConsole } from './session';
import { Problem } from './ui';

/** Codes that mean the interrupt no longer waits: its row goes, with a notice. */
export const goneCodes = ['ALREADY_ANSWERED', 'INTERRUPT_STALE', 'SESSION_CLOSED', 'NOT_FOUND'];

export interface Answered {
  decision: 'APPROVE' | 'DENY' | 'RETRY' | 'SKIP';
}

interface Props {
  item: Pick<InboxItem, 'interruptId' | 'kind' | 'action' | 'session' | 'approval' | 'hold'>;
  /** The answer was taken. */
  onAnswered: (a: Answered) => void;
  /** The interrupt no longer waits (answered elsewhere, session closed...). */
  onGone: (err: APIError) => void;
  /**
   * An answer is on its way (true) or was refused for another reason
   * (false): the inbox then knows the ANSWERED update that may come before
   * the mutation's answer is this tab's own.
   */
  onSending?: (sending: boolean) => void;
}

type SchemaState = { state: 'idle' | 'loading' } | { state: 'ready'; schema: unknown } | { state: 'unreadable'; why: string };

export function AnswerForm({ item, onAnswered, onGone, onSending }: Props) {
  const { token, can } = useConsole();
  const id = useId();
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<APIError | null>(null);
  const [editing, setEditing] = useState(false);
  const [input, setInput] = useState(() => pretty(item.approval?.input ?? {}));
  const [schema, setSchema] = useState<SchemaState>({ state: 'idle' });

  const checked = useMemo(
    () => (editing && schema.state !== 'loading' && schema.state !== 'idle' ? check(input, schema.state === 'ready' ? schema.schema : null) : null),
    [editing, input, schema],
  );

  if (!can.respond(item.action.id)) {
    return <p className="muted">You may read this but not answer it: answering needs RESPOND on the action.</p>;
  }

  const send = async (response: Record<string, unknown>, decision: Answered['decision']) => {
    setBusy(true);
    setError(null);
    onSending?.(true);
    try {
      await request(respondMutation, { a: item.action.id, s: item.session.id, i: item.interruptId, r: response }, token);
      onAnswered({ decision });
    } catch (err) {
      const e = err instanceof APIError ? err : new APIError([{ message: String(err) }]);
      onSending?.(false);
      if (goneCodes.includes(e.code)) onGone(e);
      else setError(e);
      setBusy(false);
    }
  };

  const openEditor = async () => {
    setEditing(true);
    if (schema.state !== 'idle') return;
    setSchema({ state: 'loading' });
    try {
      const d = await request<ToolSchemaAnswer>(toolSchemaQuery, { a: item.action.id, s: item.session.id }, token);
      const a = d.actions.action?.session?.approvals.find((x) => x.interruptId === item.interruptId);
      setSchema({ state: 'ready', schema: a?.toolAction?.definition.tool?.inputSchema ?? null });
    } catch (err) {
      setSchema({
        state: 'unreadable',
        why:
          err instanceof APIError && err.code === 'FORBIDDEN'
            ? "This token may not read the tool's definition, so the input is checked as JSON only; the server checks it against the tool's schema when the call runs."
            : `The tool's schema could not be read (${(err as Error).message}); the input is checked as JSON only.`,
      });
    }
  };

  const reasonId = `${id}-text`;
  if (item.kind === 'APPROVAL' && item.approval) {
    const reason = text.trim() ? { reason: text.trim() } : {};
    return (
      <form className="answer" onSubmit={(e) => e.preventDefault()} aria-label={`Answer the approval request for ${item.approval.tool} in session ${item.session.id}`}>
        <label htmlFor={reasonId}>Reason (shown to the agent; a denial's reason is what it is told)</label>
        <textarea id={reasonId} rows={2} value={text} onChange={(e) => setText(e.target.value)} maxLength={1000} disabled={busy} />
        {editing ? (
          <div className="editor">
            <label htmlFor={`${id}-input`}>Replacement input (JSON)</label>
            <textarea
              id={`${id}-input`}
              className="code"
              rows={Math.min(16, Math.max(4, input.split('\n').length + 1))}
              value={input}
              onChange={(e) => setInput(e.target.value)}
              spellCheck={false}
              aria-describedby={`${id}-check`}
              aria-invalid={checked && !checked.ok ? true : undefined}
              disabled={busy}
            />
            <div id={`${id}-check`} className="check" aria-live="polite">
              {schema.state === 'loading' ? <p className="muted">Reading the tool's input schema…</p> : null}
              {schema.state === 'unreadable' ? <p className="muted">{schema.why}</p> : null}
              {schema.state === 'ready' && schema.schema === null ? <p className="muted">The tool has no input schema: any JSON object goes.</p> : null}
              {checked && checked.ok ? (
                <p className="ok">{schema.state === 'ready' && schema.schema !== null ? "Matches the tool's input schema." : 'Valid JSON object.'}</p>
              ) : null}
              {checked && !checked.ok ? (
                <ul className="problems" aria-label="Problems with the replacement input">
                  {checked.problems.map((p, i) => (
                    <li key={i}>
                      {p.at && p.at !== '/' ? <code>{p.at}</code> : null} {p.message}
                    </li>
                  ))}
                </ul>
              ) : null}
            </div>
          </div>
        ) : null}
        <div className="buttons">
          {editing ? (
            <>
              <button
                type="button"
                className="primary"
                disabled={busy || !checked || !checked.ok}
                onClick={() => checked?.ok && send({ approval: { decision: 'APPROVE', input: checked.value, ...reason } }, 'APPROVE')}
              >
                Approve with this input
              </button>
              <button type="button" onClick={() => setEditing(false)} disabled={busy}>
                Keep the original input
              </button>
            </>
          ) : (
            <>
              {item.approval.mayApprove ? (
                <button type="button" className="primary" disabled={busy} onClick={() => send({ approval: { decision: 'APPROVE', ...reason } }, 'APPROVE')}>
                  Approve
                </button>
              ) : null}
              {item.approval.mayReplaceInput ? (
                <button type="button" onClick={openEditor} disabled={busy}>
                  Approve with changes…
                </button>
              ) : null}
            </>
          )}
          <button type="button" className="danger" disabled={busy} onClick={() => send({ approval: { decision: 'DENY', ...reason } }, 'DENY')}>
            Deny
          </button>
        </div>
        {!item.approval.mayApprove ? (
          <p className="muted">
            You may deny this call but not approve it: its tool's owner requires approval of every call, which needs RESPOND on the tool action too.
          </p>
        ) : !item.approval.mayReplaceInput ? (
          <p className="muted">Approving with a replacement input needs CALL on the tool action (the replacement is a call you make).</p>
        ) : null}
        <Problem error={error} what="Not answered" />
      </form>
    );
  }

  if (item.kind === 'HOLD' && item.hold) {
    const note = text.trim() ? { note: text.trim() } : {};
    const skipWhy = item.hold.skipRefusal;
    return (
      <form className="answer" onSubmit={(e) => e.preventDefault()} aria-label={`Answer the hold of turn ${item.hold.turn} in session ${item.session.id}`}>
        <label htmlFor={reasonId}>Note (shown to the agent with the inputs it runs again)</label>
        <textarea id={reasonId} rows={2} value={text} onChange={(e) => setText(e.target.value)} maxLength={1024} disabled={busy} />
        <div className="buttons">
          <button type="button" className="primary" disabled={busy} onClick={() => send({ hold: { decision: 'RETRY', ...note } }, 'RETRY')}>
            Retry the turn
          </button>
          <button
            type="button"
            disabled={busy || !!skipWhy}
            aria-describedby={skipWhy ? `${id}-skip` : undefined}
            onClick={() => send({ hold: { decision: 'SKIP', ...note } }, 'SKIP')}
          >
            Skip its inputs
          </button>
        </div>
        {skipWhy ? (
          <p id={`${id}-skip`} className="muted">
            Skip is not available: {skipWhy}.
          </p>
        ) : null}
        <Problem error={error} what="Not answered" />
      </form>
    );
  }
  return null;
}
