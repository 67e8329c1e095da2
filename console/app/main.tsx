// The console served at /console/ (issue 13): an inbox for responders, and
// sessions, actions and the ledger for operators, live over the GraphQL
// API's subscriptions. Every asset comes from this server.
import './console.css';

import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter, Route, Routes } from 'react-router';

import { Layout } from './layout';
import { ActionScreen } from './screens/action';
import { ActionsScreen } from './screens/actions';
import { InboxScreen } from './screens/inbox';
import { LedgerScreen } from './screens/ledger';
import { NotFound } from './screens/notfound';
import { SessionScreen } from './screens/session';
import { SessionsScreen } from './screens/sessions';
import { SignIn } from './screens/signin';
import { SessionGate } from './session';
import { NoticeProvider } from './ui';

const root = document.getElementById('root');
if (root === null) throw new Error('#root is missing from the page');

createRoot(root).render(
  <StrictMode>
    <BrowserRouter basename="/console">
      <SessionGate signIn={(p) => <SignIn {...p} />}>
        <NoticeProvider>
          <Routes>
            <Route element={<Layout />}>
              <Route index element={<InboxScreen />} />
              <Route path="inbox" element={<InboxScreen />} />
              <Route path="sessions" element={<SessionsScreen />} />
              <Route path="actions/:actionId/sessions" element={<SessionsScreen />} />
              <Route path="sessions/:actionId/:sessionId" element={<SessionScreen />} />
              <Route path="sessions/:actionId/:sessionId/turns/:turn" element={<SessionScreen />} />
              <Route path="sessions/:actionId/:sessionId/interrupts/:interruptId" element={<SessionScreen />} />
              <Route path="actions" element={<ActionsScreen />} />
              <Route path="actions/:actionId" element={<ActionScreen />} />
              <Route path="ledger" element={<LedgerScreen />} />
              <Route path="*" element={<NotFound />} />
            </Route>
          </Routes>
        </NoticeProvider>
      </SessionGate>
    </BrowserRouter>
  </StrictMode>,
);
