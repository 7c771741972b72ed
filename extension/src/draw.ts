/**
 * Layout → an SVG element. All text goes in through textContent (never markup),
 * so a hostile label in a saved notebook cannot inject anything; that is what lets
 * the renderer declare itself safe and render untrusted notebooks.
 *
 * The styles live inside the SVG (SVG_CSS), so "Export SVG" of a clone looks the
 * same in a browser tab or Inkscape as in JupyterLab; the CSS variables carry
 * fallbacks for use outside JupyterLab.
 */
import { HEADER_H, LABEL_FONT_PX, LINE_H, NODE_FONT_PX, PAD_X, PAD_Y, TOGGLE_W, type Layout } from './layout';
import type { Highlight } from './search';

const SVG_NS = 'http://www.w3.org/2000/svg';

export const SVG_CSS = `
.mlg-svg { font-family: 'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', monospace; }
.mlg-svg text { font-size: ${NODE_FONT_PX}px; fill: #1a1a1a; dominant-baseline: middle; pointer-events: none; }
.mlg-svg .mlg-bg { fill: var(--jp-layout-color0, #ffffff); }
.mlg-svg .mlg-node rect.mlg-box { stroke: #555; stroke-width: 1; rx: 5; ry: 5; }
.mlg-svg .mlg-node { cursor: pointer; }
.mlg-svg .mlg-node text.mlg-l0 { font-weight: bold; }
.mlg-svg .mlg-kind-input rect.mlg-box, .mlg-svg .mlg-kind-output rect.mlg-box { fill: #dff0d8; }
.mlg-svg .mlg-kind-op rect.mlg-box { fill: #dbe9f7; }
.mlg-svg .mlg-kind-customized rect.mlg-box { fill: #e8ddf5; stroke: #6a3d9a; }
.mlg-svg .mlg-kind-loader rect.mlg-box { fill: #d9f2ef; stroke: #1b7f74; }
.mlg-svg .mlg-kind-saver rect.mlg-box { fill: #fbe3d2; stroke: #b35806; }
.mlg-svg .mlg-kind-accumulator rect.mlg-box { fill: #fff3c4; stroke: #9a7d0a; }
.mlg-svg .mlg-kind-chain rect.mlg-box { fill: #f3e1ec; stroke: #a6427c; }
.mlg-svg .mlg-expanded > rect.mlg-box { fill-opacity: 0.28; stroke-dasharray: 5 3; }
.mlg-svg .mlg-expanded > rect.mlg-header { fill-opacity: 0.9; }
.mlg-svg .mlg-edge { fill: none; stroke: var(--jp-ui-font-color2, #777); stroke-width: 1.3; }
.mlg-svg .mlg-arrow { fill: var(--jp-ui-font-color2, #777); }
.mlg-svg .mlg-edge-label rect { fill: var(--jp-layout-color0, #ffffff); fill-opacity: 0.85; }
.mlg-svg .mlg-edge-label text { font-size: ${LABEL_FONT_PX}px; fill: var(--jp-ui-font-color2, #555); }
.mlg-svg .mlg-toggle rect { fill: #ffffff; stroke: #555; rx: 3; ry: 3; }
.mlg-svg .mlg-toggle text { font-weight: bold; text-anchor: middle; }
.mlg-svg .mlg-toggle:hover rect { fill: #ffe9a8; }
.mlg-svg .mlg-dim { opacity: 0.35; }
.mlg-svg .mlg-match > rect.mlg-box { stroke: #e4572e; stroke-width: 3; }
.mlg-svg .mlg-contains > rect.mlg-box { stroke: #e4572e; stroke-width: 2; stroke-dasharray: 2 2; }
.mlg-svg .mlg-selected > rect.mlg-box { stroke: #0b61d8; stroke-width: 3; }
.mlg-svg .mlg-nometric > rect.mlg-box { fill: #eeeeee; }
.mlg-svg .mlg-node:focus { outline: none; }
.mlg-svg .mlg-node:focus-visible > rect.mlg-box { stroke: #0b61d8; stroke-width: 3; stroke-dasharray: none; }
.mlg-svg .mlg-neighbour > rect.mlg-box { stroke: #0b61d8; stroke-width: 2; stroke-dasharray: 4 2; }
.mlg-svg .mlg-edge-hit { fill: none; stroke: transparent; stroke-width: 10; cursor: pointer; }
.mlg-svg .mlg-edge-hot .mlg-edge { stroke: #0b61d8; stroke-width: 2.2; }
.mlg-svg .mlg-edge-selected .mlg-edge { stroke: #e4572e; stroke-width: 2.6; }
.mlg-svg .mlg-edge-label { cursor: pointer; }
`;

export interface DrawStyle {
  /** Unique per drawing: marker ids are document-global and one notebook holds many graphs. */
  uid: string;
  highlight: Map<string, Highlight>;
  /** Any search active: non-matching nodes are dimmed. */
  searching: boolean;
  selected: string | null;
  /** Node id → fill colour when colouring by a metric; absent ids get the no-data style. */
  fills: Map<string, { fill: string; text: string }> | null;
}

function el<K extends keyof SVGElementTagNameMap>(
  doc: Document,
  tag: K,
  attrs: Record<string, string | number> = {},
  parent?: Element
): SVGElementTagNameMap[K] {
  const e = doc.createElementNS(SVG_NS, tag) as SVGElementTagNameMap[K];
  for (const [k, v] of Object.entries(attrs)) {
    e.setAttribute(k, String(v));
  }
  parent?.appendChild(e);
  return e;
}

/** Orthogonal polyline with rounded corners. */
export function pathData(points: { x: number; y: number }[], radius = 6): string {
  if (points.length < 2) {
    return '';
  }
  let d = `M${points[0].x},${points[0].y}`;
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i - 1];
    const c = points[i];
    const n = points[i + 1];
    const r = Math.min(radius, Math.hypot(c.x - p.x, c.y - p.y) / 2, Math.hypot(n.x - c.x, n.y - c.y) / 2);
    const a = towards(c, p, r);
    const b = towards(c, n, r);
    d += ` L${a.x},${a.y} Q${c.x},${c.y} ${b.x},${b.y}`;
  }
  const last = points[points.length - 1];
  return `${d} L${last.x},${last.y}`;
}

function towards(from: { x: number; y: number }, to: { x: number; y: number }, r: number) {
  const len = Math.hypot(to.x - from.x, to.y - from.y) || 1;
  const k = r / len;
  return { x: +(from.x + (to.x - from.x) * k).toFixed(2), y: +(from.y + (to.y - from.y) * k).toFixed(2) };
}

/** Draws `layout`; nodes carry `data-id`, toggles `data-toggle`, for event delegation by the widget. */
export function drawSvg(doc: Document, layout: Layout, style: DrawStyle): SVGSVGElement {
  const w = Math.ceil(layout.width);
  const h = Math.ceil(layout.height);
  const svg = el(doc, 'svg', { class: 'mlg-svg', width: w, height: h, viewBox: `0 0 ${w} ${h}` });
  svg.setAttribute('xmlns', SVG_NS);
  el(doc, 'style', {}, svg).textContent = SVG_CSS;
  const defs = el(doc, 'defs', {}, svg);
  const marker = el(doc, 'marker', {
    id: `mlg-arrow-${style.uid}`,
    viewBox: '0 0 10 10',
    refX: 9,
    refY: 5,
    markerWidth: 7,
    markerHeight: 7,
    orient: 'auto-start-reverse'
  }, defs);
  el(doc, 'path', { class: 'mlg-arrow', d: 'M0,0 L10,5 L0,10 z' }, marker);
  el(doc, 'rect', { class: 'mlg-bg', x: 0, y: 0, width: w, height: h }, svg);

  const frames = el(doc, 'g', { class: 'mlg-frames' }, svg);
  const edges = el(doc, 'g', { class: 'mlg-edges' }, svg);
  const leaves = el(doc, 'g', { class: 'mlg-nodes' }, svg);

  for (const e of layout.edges) {
    const g = el(doc, 'g', { class: 'mlg-edge-g', 'data-edge': e.id }, edges);
    const dimmed =
      style.searching &&
      style.highlight.get(e.link.source) === 'none' &&
      style.highlight.get(e.link.target) === 'none';
    if (dimmed) {
      g.classList.add('mlg-dim');
    }
    const d = pathData(e.points);
    el(doc, 'path', { class: 'mlg-edge', d, 'marker-end': `url(#mlg-arrow-${style.uid})` }, g);
    // A wide invisible stroke over the thin line: edges are clickable (their tensor in the panel).
    el(doc, 'path', { class: 'mlg-edge-hit', d }, g);
    if (e.label) {
      const lg = el(doc, 'g', { class: 'mlg-edge-label' }, g);
      el(doc, 'rect', { x: e.label.x, y: e.label.y, width: e.label.width, height: e.label.height }, lg);
      el(doc, 'text', { x: e.label.x + 2, y: e.label.y + e.label.height / 2 }, lg).textContent = e.label.text;
    }
  }

  for (const n of layout.nodes) {
    const g = el(doc, 'g', {
      class: `mlg-node mlg-kind-${n.node.kind}`,
      'data-id': n.id,
      transform: `translate(${n.x},${n.y})`,
      // Focusable, so the graph can be walked with Tab and the arrow keys.
      tabindex: 0,
      role: 'button',
      'aria-label': `${n.node.lines.filter(Boolean).join(', ')}${n.node.container ? (n.expanded ? ' (expanded)' : ' (collapsed; Enter expands)') : ''}`
    }, n.expanded ? frames : leaves);
    const hl = style.highlight.get(n.id) ?? 'none';
    if (n.expanded) {
      g.classList.add('mlg-expanded');
    }
    if (hl === 'match') {
      g.classList.add('mlg-match');
    } else if (hl === 'contains') {
      g.classList.add('mlg-contains');
    } else if (style.searching && !n.expanded) {
      g.classList.add('mlg-dim');
    }
    if (style.selected === n.id) {
      g.classList.add('mlg-selected');
    }
    const title = el(doc, 'title', {}, g);
    title.textContent = n.node.lines.filter(Boolean).join('\n');
    const box = el(doc, 'rect', { class: 'mlg-box', x: 0, y: 0, width: n.width, height: n.height }, g);
    const fill = style.fills?.get(n.id);
    if (style.fills && !fill && n.node.metricKey) {
      g.classList.add('mlg-nometric');
    }
    if (n.expanded) {
      const header = el(doc, 'rect', { class: 'mlg-box mlg-header', x: 0, y: 0, width: n.width, height: HEADER_H }, g);
      if (fill) {
        header.setAttribute('style', `fill: ${fill.fill}`);
      }
      const t = el(doc, 'text', { class: 'mlg-l0', x: PAD_X, y: HEADER_H / 2 }, g);
      t.textContent = n.node.header;
      if (fill) {
        t.setAttribute('style', `fill: ${fill.text}`);
      }
    } else {
      if (fill) {
        box.setAttribute('style', `fill: ${fill.fill}`);
      }
      n.node.lines.filter(Boolean).forEach((line, i) => {
        const t = el(doc, 'text', { class: `mlg-l${i}`, x: PAD_X, y: PAD_Y + LINE_H * i + LINE_H / 2 }, g);
        t.textContent = line;
        if (fill) {
          t.setAttribute('style', `fill: ${fill.text}`);
        }
      });
    }
    if (n.node.container) {
      const tg = el(doc, 'g', {
        class: 'mlg-toggle',
        'data-toggle': n.id,
        transform: `translate(${n.width - TOGGLE_W - 3},4)`
      }, g);
      el(doc, 'title', {}, tg).textContent = n.expanded ? 'Collapse' : 'Expand';
      el(doc, 'rect', { x: 0, y: 0, width: TOGGLE_W, height: 16 }, tg);
      el(doc, 'text', { x: TOGGLE_W / 2, y: 8.5 }, tg).textContent = n.expanded ? '−' : '+';
    }
  }
  return svg;
}

/**
 * A standalone SVG document of `svg` (what is expanded, highlighted and coloured), for
 * download. Pan and zoom only move the on-screen viewBox: the export is always the whole
 * graph at its natural size (`width`×`height` layout units).
 */
export function serializeSvg(svg: SVGSVGElement, width: number, height: number): string {
  const clone = svg.cloneNode(true) as SVGSVGElement;
  clone.setAttribute('xmlns', SVG_NS);
  const w = Math.ceil(width);
  const h = Math.ceil(height);
  clone.setAttribute('viewBox', `0 0 ${w} ${h}`);
  clone.setAttribute('width', String(w));
  clone.setAttribute('height', String(h));
  clone.removeAttribute('style');
  clone.querySelectorAll('[tabindex]').forEach(e => e.removeAttribute('tabindex'));
  return `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(clone)}\n`;
}
