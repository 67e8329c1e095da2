// Sign-in with a bearer token (AUTH=on). The token stays in this tab's
// sessionStorage: closing the tab forgets it.
import { useState, type FormEvent } from 'react';

import { useTitle } from '../hooks';

export function SignIn({ onToken, why }: { onToken: (t: string) => Promise<string | null>; why?: string }) {
  useTitle('Sign in');
  const [token, setToken] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const t = token.trim().replace(/^Bearer\s+/i, '');
    if (!t) {
      setProblem('Paste a token first.');
      return;
    }
    setBusy(true);
    setProblem(await onToken(t));
    setBusy(false);
  };
  return (
    <main id="main" className="signin">
      <h1>actionsledger console</h1>
      <p>This server asks for a bearer token. Paste the token you were given (for example by <code>actionsledger tokens create</code>).</p>
      {why ? (
        <p className="problem" role="alert">
          {why}
        </p>
      ) : null}
      <form onSubmit={submit}>
        <label htmlFor="token">Token</label>
        <input
          id="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={token}
          onChange={(e) => setToken(e.target.value)}
          aria-describedby="token-help"
          aria-invalid={problem ? true : undefined}
          autoFocus
        />
        <p id="token-help" className="muted">
          Kept in this browser tab only, until you sign out or close it.
        </p>
        {problem ? (
          <p className="problem" role="alert">
            {problem}
          </p>
        ) : null}
        <button type="submit" className="primary" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
