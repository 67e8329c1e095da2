// The actions the token may read, with status and version.
import { Link } from 'react-router';

import { actionsQuery, type ActionRow } from '../actionlist';
import { useNow, useQuery, useTitle } from '../hooks';
import { paths } from '../links';
import { useConsole } from '../session';
import { Loading, Problem, Status, When } from '../ui';

export function ActionsScreen() {
  useTitle('Actions');
  const { viewer } = useConsole();
  const now = useNow(30_000);
  const aq = actionsQuery(viewer);
  const q = useQuery<unknown>(aq.query, aq.vars, aq.query, aq.query === '');
  const rows: ActionRow[] | null = q.data ? aq.rows(q.data) : aq.query === '' ? [] : null;
  return (
    <>
      <h1>Actions</h1>
      <Problem error={q.error} what="The actions could not be read" />
      {rows === null && !q.error ? <Loading what="the actions" /> : null}
      {rows && rows.length === 0 ? <p className="empty">This token may read no action.</p> : null}
      {rows && rows.length > 0 ? (
        <div className="table-wrap">
          <table className="rows">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Status</th>
                <th scope="col">Version</th>
                <th scope="col">Changed</th>
                <th scope="col">Sessions</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((a) => (
                <tr key={a.id}>
                  <th scope="row">
                    <Link to={paths.action(a.id)}>{a.definition.name}</Link>
                    <div className="mono small muted">{a.id}</div>
                  </th>
                  <td data-label="Kind">
                    {a.definition.kind}
                    {a.definition.tool ? (
                      <>
                        {' '}
                        · tool <code>{a.definition.tool.name}</code>
                      </>
                    ) : null}
                  </td>
                  <td data-label="Status">
                    <Status value={a.status} />
                  </td>
                  <td data-label="Version">{a.version}</td>
                  <td data-label="Changed">
                    <When iso={a.updatedAt} now={now} />
                  </td>
                  <td data-label="Sessions">
                    <Link to={paths.sessions(a.id)} aria-label={`Sessions of ${a.definition.name}`}>
                      Sessions
                    </Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
