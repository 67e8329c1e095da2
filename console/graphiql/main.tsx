// The GraphiQL page served at /graphiql (issue 12): GraphiQL 5 with every
// asset bundled by Vite and embedded in the binary, so the page needs no
// network but this server's.
import 'graphiql/setup-workers/vite';
import 'graphiql/style.css';
import './graphiql.css';

import { GraphiQL } from 'graphiql';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';

import { examples } from './examples';
import { examplesPlugin } from './examples-plugin';
import { fetcher } from './fetcher';

// A first visit (nothing stored yet) opens the Examples panel; later visits
// keep GraphiQL's own choice.
const firstVisit = (() => {
  try {
    return window.localStorage.getItem('graphiql:tabState') === null;
  } catch {
    return true; // storage disabled
  }
})();

const root = document.getElementById('graphiql');
if (root === null) {
  throw new Error('#graphiql is missing from the page');
}

createRoot(root).render(
  <StrictMode>
    <GraphiQL
      fetcher={fetcher(window.location)}
      defaultTabs={examples.map((e) => ({ query: e.query, variables: e.variables }))}
      // GraphiQL fills the first tab's query editor from defaultTabs but not
      // its variables editor (a fresh page ran CreateMonitor without its
      // id): on a first visit, give them as the initial variables too.
      initialVariables={firstVisit ? examples[0].variables : undefined}
      defaultEditorToolsVisibility="variables"
      plugins={[examplesPlugin]}
      visiblePlugin={firstVisit ? examplesPlugin : undefined}
    >
      <GraphiQL.Logo>
        <span className="al-logo">actionsledger</span>
      </GraphiQL.Logo>
    </GraphiQL>
  </StrictMode>,
);
