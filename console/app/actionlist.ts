// Reading the actions a token may see: all of them when it may list
// actions, else each one its policies name (one request, one alias each).
import type { Viewer } from './policy';
import { readableActions } from './policy';

export const actionFields = `id status version updatedAt definition { name kind tool { name } }`;

export interface ActionRow {
  id: string;
  status: string;
  version: number;
  updatedAt: string;
  definition: { name: string; kind: string; tool: null | { name: string } };
}

/** The query reading the actions v may read, and how to take its answer apart. */
export function actionsQuery(v: Viewer): { query: string; vars: Record<string, unknown>; rows: (d: unknown) => ActionRow[] } {
  const readable = readableActions(v);
  if (readable === 'all') {
    return {
      query: `query Actions { actions { actions(first: 500) { nodes { ${actionFields} } } } }`,
      vars: {},
      rows: (d) => (d as { actions: { actions: { nodes: ActionRow[] } } }).actions.actions.nodes,
    };
  }
  if (readable.length === 0) return { query: '', vars: {}, rows: () => [] };
  const ids = readable.slice(0, 100);
  const params = ids.map((_, i) => `$a${i}: UUID!`).join(', ');
  const fields = ids.map((_, i) => `a${i}: action(id: $a${i}) { ${actionFields} }`).join('\n');
  const vars = Object.fromEntries(ids.map((id, i) => [`a${i}`, id]));
  return {
    query: `query Actions(${params}) { actions { ${fields} } }`,
    vars,
    rows: (d) =>
      Object.values((d as { actions: Record<string, ActionRow | null> }).actions)
        .filter((x): x is ActionRow => x !== null)
        .sort((a, b) => a.definition.name.localeCompare(b.definition.name)),
  };
}
