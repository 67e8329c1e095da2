// The Examples panel in GraphiQL's sidebar: each example opens in a new
// tab with its variables filled in.
import { pick, useGraphiQL, useGraphiQLActions, type GraphiQLPlugin } from '@graphiql/react';

import { examples, type Example } from './examples';

function ExamplesIcon() {
  // A list with a play mark, drawn like GraphiQL's own 1.5px-stroke icons.
  return (
    <svg viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="1.5" aria-hidden="true">
      <path d="M4 6h10M4 12h7M4 18h10" strokeLinecap="round" />
      <path d="M15 10.5v6l5-3z" strokeLinejoin="round" />
    </svg>
  );
}

function ExamplesPanel() {
  const { queryEditor, variableEditor } = useGraphiQL(pick('queryEditor', 'variableEditor'));
  const { addTab } = useGraphiQLActions();
  const open = (e: Example) => {
    addTab();
    queryEditor?.setValue(e.query);
    variableEditor?.setValue(e.variables);
  };
  return (
    <section className="al-examples" aria-labelledby="al-examples-title">
      <div className="graphiql-doc-explorer-title" id="al-examples-title">
        Examples
      </div>
      <p>
        Run them in order on a fresh database: each works on what the one before it created. A click opens the
        example in a new tab.
      </p>
      <ol>
        {examples.map((e) => (
          <li key={e.title}>
            <button type="button" onClick={() => open(e)}>
              <span className="al-example-title">{e.title}</span>
              <span className="al-example-description">{e.description}</span>
              {e.source !== '' && <code>examples/{e.source}</code>}
            </button>
          </li>
        ))}
      </ol>
    </section>
  );
}

/** The Examples plugin: its title is what the sidebar button is labelled. */
export const examplesPlugin: GraphiQLPlugin = {
  title: 'Examples',
  icon: ExamplesIcon,
  content: ExamplesPanel,
};
