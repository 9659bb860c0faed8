/**
 * No import cycles among the project's own modules under main/, app/ and renderer/, type-only
 * imports included (issue 22: the budget ↔ documents services and the chat store ↔ its slices
 * were such cycles). Cycles are the strongly connected components of the import graph (Tarjan,
 * "Depth-first search and linear graph algorithms", SIAM J. Comput. 1972) with more than one file.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../helpers/paths.ts';
import { projectImports, sourceFiles } from '../helpers/source-imports.ts';

/** The strongly connected components of `graph` with more than one node, each sorted. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop()!; ; w = stack.pop()!) {
      onStack.delete(w);
      component.push(w);
      if (w === v) break;
    }
    if (component.length > 1) out.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

function importGraph(folders: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of folders.flatMap(sourceFiles)) {
    const file = f.split(path.sep).join('/');
    graph.set(file, projectImports(file, readFileSync(path.join(PROJECT_ROOT, f), 'utf8')));
  }
  return graph;
}

describe('import cycles', () => {
  it('main/, app/ and renderer/ have none, type-only imports included', () => {
    assert.deepEqual(cycles(importGraph(['main', 'app', 'renderer'])), []);
  });

  it('the search finds a cycle when there is one (so the check above can fail)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts', 'd.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['d.ts']],
    ]);
    assert.deepEqual(cycles(graph), [['a.ts', 'b.ts', 'c.ts']]);
  });
});
