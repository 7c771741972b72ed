/**
 * Colouring nodes by a metric from the JSON's optional `metrics` object
 * (`{"op2": {"latency_us": 12.1}}`): which metrics exist, and a sequential colour
 * scale with its legend.
 */
import { fmtNumber } from './format';
import type { GraphNode } from './model';
import type { Metrics } from './mugraph';

/** Metric names with at least one finite numeric value, sorted. */
export function metricNames(metrics: Metrics | undefined): string[] {
  const names = new Set<string>();
  for (const vals of Object.values(metrics ?? {})) {
    for (const [k, v] of Object.entries(vals)) {
      if (typeof v === 'number' && Number.isFinite(v)) {
        names.add(k);
      }
    }
  }
  return [...names].sort();
}

export function metricValue(metrics: Metrics | undefined, node: GraphNode, name: string): number | null {
  if (!node.metricKey) {
    return null;
  }
  const v = metrics?.[node.metricKey]?.[name];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

// Viridis at 9 stops: perceptually even, readable for colour-blind users, and
// dark-to-light so "more" (e.g. slower) reads as brighter.
const VIRIDIS = [
  '#440154',
  '#472d7b',
  '#3b528b',
  '#2c728e',
  '#21918c',
  '#28ae80',
  '#5ec962',
  '#addc30',
  '#fde725'
];

function hexToRgb(h: string): [number, number, number] {
  const n = parseInt(h.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/** The viridis colour at t ∈ [0, 1] (clamped), as `#rrggbb`. */
export function viridis(t: number): string {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const f = x - i;
  const a = hexToRgb(VIRIDIS[i]);
  const b = hexToRgb(VIRIDIS[i + 1]);
  const c = a.map((v, k) => Math.round(v + (b[k] - v) * f));
  return `#${c.map(v => v.toString(16).padStart(2, '0')).join('')}`;
}

/** Text colour that stays readable on `bg` (#rrggbb). */
export function textColourOn(bg: string): string {
  const [r, g, b] = hexToRgb(bg);
  return 0.299 * r + 0.587 * g + 0.114 * b > 140 ? '#111111' : '#ffffff';
}

export interface ColourScale {
  min: number;
  max: number;
  colour(v: number): string;
  /** Legend ticks (value, colour), min to max. */
  ticks: { value: number; label: string; colour: string }[];
}

/** A linear scale over the values present; a single value maps to the middle colour. */
export function colourScale(values: number[]): ColourScale | null {
  const vs = values.filter(v => Number.isFinite(v));
  if (!vs.length) {
    return null;
  }
  const min = Math.min(...vs);
  const max = Math.max(...vs);
  const span = max - min;
  const colour = (v: number) => viridis(span > 0 ? (v - min) / span : 0.5);
  const n = span > 0 ? 5 : 1;
  const ticks = Array.from({ length: n }, (_, i) => {
    const value = n === 1 ? min : min + (span * i) / (n - 1);
    return { value, label: fmtNumber(value), colour: colour(value) };
  });
  return { min, max, colour, ticks };
}
