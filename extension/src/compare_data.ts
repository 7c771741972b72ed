/** What the compare view shows besides the graphs (pure, for the unit tests): its table and shared colour scale. */
import { metricValue } from './metrics';
import { buildModel } from './model';
import type { CompareJSON } from './mugraph';

/** Rows of the numbers table: every summary key, in first-seen order, with each candidate's value. */
export function compareRows(data: CompareJSON): { key: string; values: (number | string | null)[] }[] {
  const keys: string[] = [];
  for (const c of data.candidates) {
    for (const k of Object.keys(c.graph.view?.summary ?? {})) {
      if (!keys.includes(k)) {
        keys.push(k);
      }
    }
  }
  return keys.map(key => ({ key, values: data.candidates.map(c => c.graph.view?.summary?.[key] ?? null) }));
}

/** Every candidate's values of `metric` (the shared colour scale's domain). */
export function sharedDomain(data: CompareJSON, metric: string): number[] {
  const out: number[] = [];
  for (const c of data.candidates) {
    const m = buildModel(c.graph);
    for (const n of m.nodes.values()) {
      const v = metricValue(m.metrics, n, metric);
      if (v !== null) {
        out.push(v);
      }
    }
  }
  return out;
}
