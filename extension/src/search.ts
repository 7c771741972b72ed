/**
 * Search over every node of the model (all levels, collapsed or not).
 *
 * Matching hidden nodes matters: a search for `rms` should point at the collapsed
 * customized op that holds the rms accumulator, so `highlightState` marks visible
 * containers that hold a hidden match.
 */
import { ancestors, representative, type GraphModel } from './model';

/**
 * Node ids whose search text contains every whitespace-separated term of `query`
 * (case-insensitive). `×` and `x` between digits are the same (`16x4096` finds
 * `16×4096`). An empty query matches nothing.
 */
export function searchNodes(model: GraphModel, query: string): Set<string> {
  const terms = normalise(query).split(/\s+/).filter(Boolean);
  const out = new Set<string>();
  if (!terms.length) {
    return out;
  }
  for (const n of model.nodes.values()) {
    const text = normalise(n.searchText);
    if (terms.every(t => text.includes(t))) {
      out.add(n.id);
    }
  }
  return out;
}

function normalise(s: string): string {
  return s.toLowerCase().replace(/(\d)\s*[x×]\s*(?=\d)/g, '$1×');
}

export type Highlight = 'match' | 'contains' | 'none';

/**
 * For each visible node: `match` if it matches itself, `contains` if a hidden
 * node it stands for (or, for an expanded container, a node inside it) matches.
 */
export function highlightState(
  matches: ReadonlySet<string>,
  visibleIds: Iterable<string>,
  expanded: ReadonlySet<string>
): Map<string, Highlight> {
  const contains = new Set<string>();
  for (const id of matches) {
    contains.add(representative(id, expanded));
    for (const a of ancestors(id)) {
      contains.add(a);
    }
  }
  const out = new Map<string, Highlight>();
  for (const id of visibleIds) {
    out.set(id, matches.has(id) ? 'match' : contains.has(id) ? 'contains' : 'none');
  }
  return out;
}
