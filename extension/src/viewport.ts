/**
 * Pan/zoom and keyboard-navigation arithmetic of the inspector (pure: no DOM).
 *
 * A view is the graph point at the canvas's top-left corner and a zoom in screen
 * pixels per layout unit; the widget turns it into the SVG's viewBox, so zooming
 * never re-lays the graph out and text stays sharp at any scale.
 */

export interface View {
  x: number;
  y: number;
  zoom: number;
}

export interface Box {
  id: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

export const MIN_ZOOM = 0.05;
export const MAX_ZOOM = 4;

export function clampZoom(z: number): number {
  return Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, Number.isFinite(z) ? z : 1));
}

/** The whole graph (`gw`×`gh`) centred in a `cw`×`ch` canvas, never magnified beyond `maxZoom`. */
export function fitView(gw: number, gh: number, cw: number, ch: number, margin = 8, maxZoom = 1): View {
  const zoom = clampZoom(Math.min(maxZoom, (cw - 2 * margin) / Math.max(gw, 1), (ch - 2 * margin) / Math.max(gh, 1)));
  return { zoom, x: gw / 2 - cw / zoom / 2, y: gh / 2 - ch / zoom / 2 };
}

/** Zooms by `factor` keeping the graph point under the canvas pixel (`px`, `py`) where it is. */
export function zoomAt(v: View, factor: number, px: number, py: number): View {
  const zoom = clampZoom(v.zoom * factor);
  const gx = v.x + px / v.zoom;
  const gy = v.y + py / v.zoom;
  return { zoom, x: gx - px / zoom, y: gy - py / zoom };
}

/** The view after dragging the graph by (`dx`, `dy`) screen pixels. */
export function panBy(v: View, dx: number, dy: number): View {
  return { zoom: v.zoom, x: v.x - dx / v.zoom, y: v.y - dy / v.zoom };
}

/** The view with graph point (`gx`, `gy`) at the centre of the canvas. */
export function centerOn(v: View, gx: number, gy: number, cw: number, ch: number): View {
  return { zoom: v.zoom, x: gx - cw / v.zoom / 2, y: gy - ch / v.zoom / 2 };
}

/** Pans as little as possible so that `box` is inside the canvas (centred if it cannot fit). */
export function ensureVisible(v: View, box: Box, cw: number, ch: number, margin = 16): View {
  const vw = cw / v.zoom;
  const vh = ch / v.zoom;
  const m = margin / v.zoom;
  const axis = (start: number, size: number, lo: number, span: number) => {
    if (size + 2 * m > span) {
      return lo + size / 2 - span / 2;
    }
    if (lo < start + m) {
      return lo - m;
    }
    if (lo + size > start + span - m) {
      return lo + size + m - span;
    }
    return start;
  };
  return { zoom: v.zoom, x: axis(v.x, box.width, box.x, vw), y: axis(v.y, box.height, box.y, vh) };
}

export function viewBox(v: View, cw: number, ch: number): string {
  const r = (n: number) => +n.toFixed(2);
  return `${r(v.x)} ${r(v.y)} ${r(cw / v.zoom)} ${r(ch / v.zoom)}`;
}

/** Zoom factor of one wheel event: a mouse notch (≈100 px) is 1.2×, trackpads scroll in finer steps. */
export function wheelFactor(deltaY: number, deltaMode = 0): number {
  const px = deltaMode === 1 ? deltaY * 16 : deltaMode === 2 ? deltaY * 400 : deltaY;
  return Math.exp((-px / 100) * Math.log(1.2));
}

/** A height for the canvas that shows the whole graph at `zoom`, between `min` and `max` pixels. */
export function heightFor(graphH: number, zoom: number, min: number, max: number, margin = 16): number {
  return Math.round(Math.max(min, Math.min(max, graphH * zoom + 2 * margin)));
}

export type Direction = 'up' | 'down' | 'left' | 'right';

/**
 * The box an arrow key moves to from `fromId`: the nearest box whose centre lies in
 * that direction (within a 45° cone first, else anywhere on that side), sideways
 * distance counting double, so "down" follows the graph's flow.
 */
export function nearestInDirection(boxes: readonly Box[], fromId: string, dir: Direction): string | null {
  const from = boxes.find(b => b.id === fromId);
  if (!from) {
    return boxes[0]?.id ?? null;
  }
  const cx = from.x + from.width / 2;
  const cy = from.y + from.height / 2;
  let best: { id: string; score: number; cone: boolean } | null = null;
  for (const b of boxes) {
    if (b.id === fromId) {
      continue;
    }
    const dx = b.x + b.width / 2 - cx;
    const dy = b.y + b.height / 2 - cy;
    const along = dir === 'down' ? dy : dir === 'up' ? -dy : dir === 'right' ? dx : -dx;
    const across = Math.abs(dir === 'down' || dir === 'up' ? dx : dy);
    if (along <= 0) {
      continue;
    }
    const cone = across <= along;
    const score = along + 2 * across;
    if (!best || (cone && !best.cone) || (cone === best.cone && score < best.score)) {
      best = { id: b.id, score, cone };
    }
  }
  return best?.id ?? null;
}

/** The nodes linked to `id` and the links touching it, among the visible links. */
export function neighbours(
  links: readonly { id: string; source: string; target: string }[],
  id: string
): { nodes: Set<string>; edges: Set<string> } {
  const nodes = new Set<string>();
  const edges = new Set<string>();
  for (const l of links) {
    if (l.source === id || l.target === id) {
      edges.add(l.id);
      nodes.add(l.source === id ? l.target : l.source);
    }
  }
  return { nodes, edges };
}

/** Index of the next (`step` 1) or previous (-1) search match, wrapping around; -1 when there is none. */
export function stepMatch(count: number, current: number, step: 1 | -1): number {
  if (count <= 0) {
    return -1;
  }
  if (current < 0 || current >= count) {
    return step > 0 ? 0 : count - 1;
  }
  return (current + step + count) % count;
}
