/**
 * The inspector of one μGraph: toolbar (search with next/previous match, metric
 * colouring, expand/collapse, fit, zoom, full screen, SVG and PNG export), the graph
 * (wheel zoom, drag to pan, a minimap, keyboard navigation) and a side panel with the
 * attributes of the selected node or edge.
 *
 * `InspectorView` draws into any element, so the compare view (compare.ts) puts two
 * of them side by side; `MuGraphInspector` is the MIME renderer of one graph.
 *
 * It never throws into JupyterLab: any failure (bad data, a layout error) turns into
 * a message in the output, followed by the bundle's text/plain, so a broken or
 * newer-format graph still shows something useful.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';
import { drawSvg, serializeSvg } from './draw';
import { fmtNumber } from './format';
import { layoutGraph, type ElkLike, type LaidNode, type Layout } from './layout';
import { colourScale, metricNames, metricValue, textColourOn } from './metrics';
import {
  buildModel,
  containerIds,
  expandedForLevel,
  reveal,
  toggleExpanded,
  visibleGraph,
  type GraphModel
} from './model';
import { MIME_TYPE, parseMuGraph, type MuGraphJSON } from './mugraph';
import { highlightState, searchNodes } from './search';
import {
  centerOn,
  ensureVisible,
  fitView,
  heightFor,
  nearestInDirection,
  neighbours,
  panBy,
  stepMatch,
  viewBox,
  wheelFactor,
  zoomAt,
  type Direction,
  type View
} from './viewport';

let elkPromise: Promise<ElkLike> | null = null;

/** ELK is 1.6 MB: load it in its own chunk the first time a graph is drawn. */
function getElk(): Promise<ElkLike> {
  if (!elkPromise) {
    elkPromise = import(/* webpackChunkName: "elk" */ 'elkjs/lib/elk.bundled.js').then(m => {
      const ELK = (m as unknown as { default: new () => ElkLike }).default;
      return new ELK();
    });
    elkPromise.catch(() => {
      elkPromise = null; // allow a retry on the next render
    });
  }
  return elkPromise;
}

let uidCounter = 0;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { class?: string; text?: string; title?: string; attrs?: Record<string, string> } = {},
  parent?: HTMLElement
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (props.class) {
    e.className = props.class;
  }
  if (props.text !== undefined) {
    e.textContent = props.text;
  }
  if (props.title) {
    e.title = props.title;
  }
  for (const [k, v] of Object.entries(props.attrs ?? {})) {
    e.setAttribute(k, v);
  }
  parent?.appendChild(e);
  return e;
}

/** `text` in the bundle's error box (a failure is a message in the output, never an exception). */
export function showError(node: HTMLElement, message: string, text?: unknown): void {
  node.textContent = '';
  const box = h('div', { class: 'mlg-error' }, node);
  h('div', { class: 'mlg-error-msg', text: message }, box);
  if (typeof text === 'string' && text) {
    h('pre', { class: 'mlg-error-text', text }, box);
  }
}

function download(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

const SVG_NS = 'http://www.w3.org/2000/svg';
const MIN_BODY_H = 220;
const MINIMAP_W = 150;
const MINIMAP_H = 110;
const PNG_SCALE = 2;
const PNG_MAX_SIDE = 16000; // browsers refuse larger canvases

export interface InspectorOptions {
  /** Values of `metric` that the colour scale spans (the compare view passes both graphs'). */
  domain?: (metric: string) => number[];
  /** Called when the user picks another metric (the compare view keeps both sides in step). */
  onMetric?: (metric: string) => void;
  /** Side panel under the graph instead of beside it (narrow columns of the compare view). */
  compact?: boolean;
  /** File names of the exports, without extension. */
  fileStem?: string;
}

export class InspectorView {
  readonly root: HTMLDivElement;
  private readonly model: GraphModel;
  private expanded: Set<string>;
  private selected: string | null = null;
  private selectedEdge: string | null = null;
  private query = '';
  private matchIndex = -1;
  private metric = '';
  private view: View = { x: 0, y: 0, zoom: 1 };
  /** Zoomed or panned by the user: re-layouts and resizes keep their view instead of re-fitting. */
  private userMoved = false;
  private readableFit = false;
  private userSized = false;
  private setHeight = 0;
  private fitted = false;
  private graphLayout: Layout | null = null;
  private svg: SVGSVGElement | null = null;
  private layoutSeq = 0;
  private readonly uid = `g${++uidCounter}`;
  private drag: { x: number; y: number; moved: boolean; pointer: number } | null = null;
  private suppressClick = false;
  private resizeObserver: ResizeObserver | null = null;

  private searchInput!: HTMLInputElement;
  private countEl!: HTMLSpanElement;
  private metricSelect!: HTMLSelectElement;
  private legend!: HTMLDivElement;
  private body!: HTMLDivElement;
  private canvas!: HTMLDivElement;
  private minimap!: SVGSVGElement;
  private minimapViewport!: SVGRectElement;
  private panel!: HTMLDivElement;

  constructor(
    parent: HTMLElement,
    private readonly graph: MuGraphJSON,
    private readonly options: InspectorOptions = {}
  ) {
    this.model = buildModel(graph);
    this.expanded = expandedForLevel(this.model, graph.view?.expand ?? 'kernel');
    const names = metricNames(this.model.metrics);
    const wanted = graph.view?.metric;
    this.metric = wanted && names.includes(wanted) ? wanted : '';
    this.root = h('div', { class: `mlg-inspector${options.compact ? ' mlg-compact' : ''}` }, parent);
    this.buildChrome(names);
  }

  /** Lays the graph out and draws it; resolves when it is on screen. */
  async start(): Promise<void> {
    await this.relayout();
  }

  dispose(): void {
    this.resizeObserver?.disconnect();
    this.resizeObserver = null;
    this.root.ownerDocument.removeEventListener('fullscreenchange', this.onFullscreenChange);
  }

  private readonly onFullscreenChange = (): void => {
    if (!this.root.ownerDocument.fullscreenElement && this.root.classList.contains('mlg-full')) {
      this.setFull(false); // left full screen with Escape
    }
  };

  /** Colour by `metric` ('' for node kinds); no callback, so views kept in step do not loop. */
  setMetric(metric: string): void {
    if (metric !== this.metric && (metric === '' || metricNames(this.model.metrics).includes(metric))) {
      this.metric = metric;
      this.metricSelect.value = metric;
      this.redraw();
    }
  }

  // ------------------------------------------------------------------ chrome and events
  private buildChrome(names: string[]): void {
    const toolbar = h('div', { class: 'mlg-toolbar' }, this.root);
    h('span', { class: 'mlg-title', text: this.graph.view?.title || 'μGraph' }, toolbar);
    this.searchInput = h('input', {
      class: 'mlg-search',
      title: 'Highlight nodes whose type, id, shape, dtype or attributes contain every word; Enter / Shift+Enter go to the next / previous match',
      attrs: { type: 'search', placeholder: 'Search ops, shapes, maps…', 'aria-label': 'Search nodes' }
    }, toolbar);
    h('button', { class: 'mlg-btn', text: '‹', title: 'Previous match (Shift+Enter)', attrs: { 'data-action': 'match-prev', type: 'button', 'aria-label': 'Previous match' } }, toolbar);
    h('button', { class: 'mlg-btn', text: '›', title: 'Next match (Enter)', attrs: { 'data-action': 'match-next', type: 'button', 'aria-label': 'Next match' } }, toolbar);
    this.countEl = h('span', { class: 'mlg-count' }, toolbar);
    const metricLabel = h('label', { class: 'mlg-metric-label', text: 'Colour: ' }, toolbar);
    this.metricSelect = h('select', { class: 'mlg-metric', attrs: { 'aria-label': 'Colour nodes by' } }, metricLabel);
    h('option', { text: 'node kind', attrs: { value: '' } }, this.metricSelect);
    for (const n of names) {
      h('option', { text: n, attrs: { value: n } }, this.metricSelect);
    }
    this.metricSelect.value = this.metric;
    if (!names.length) {
      this.metricSelect.disabled = true;
      this.metricSelect.title = 'This μGraph carries no numeric metrics';
    }
    const buttons: [string, string, string][] = [
      ['expand-all', 'Expand all', 'Show every block and thread graph'],
      ['collapse-all', 'Collapse all', 'Show the kernel graph only'],
      ['zoom-out', '−', 'Zoom out (or the mouse wheel)'],
      ['zoom-fit', 'Fit', 'Fit the whole graph in view'],
      ['zoom-in', '+', 'Zoom in (or the mouse wheel)'],
      ['fullscreen', 'Full screen', 'Show the inspector over the whole screen (Escape returns)'],
      ['export', 'SVG', 'Download the whole graph as shown (expanded, highlighted, coloured) as an SVG file'],
      ['export-png', 'PNG', 'Download the whole graph as shown as a PNG image (2× resolution)']
    ];
    for (const [action, text, title] of buttons) {
      h('button', { class: 'mlg-btn', text, title, attrs: { 'data-action': action, type: 'button' } }, toolbar);
    }
    const summary = this.graph.view?.summary;
    if (summary && Object.keys(summary).length) {
      const strip = h('div', { class: 'mlg-summary' }, this.root);
      for (const [k, v] of Object.entries(summary)) {
        const item = h('span', { class: 'mlg-summary-item' }, strip);
        h('span', { class: 'mlg-summary-key', text: `${k} ` }, item);
        h('span', { class: 'mlg-summary-value', text: typeof v === 'number' ? fmtNumber(v) : v }, item);
      }
    }
    this.legend = h('div', { class: 'mlg-legend' }, this.root);
    this.body = h('div', { class: 'mlg-body' }, this.root);
    this.canvas = h('div', { class: 'mlg-canvas', attrs: { 'aria-label': 'μGraph: wheel zooms, drag pans, Tab and arrow keys move between nodes, Enter expands' } }, this.body);
    this.minimap = document.createElementNS(SVG_NS, 'svg');
    this.minimap.setAttribute('class', 'mlg-minimap');
    this.canvas.appendChild(this.minimap);
    this.panel = h('div', { class: 'mlg-panel' }, this.body);

    this.searchInput.addEventListener('input', () => {
      this.query = this.searchInput.value;
      this.matchIndex = -1;
      this.redraw();
    });
    this.searchInput.addEventListener('keydown', ev => {
      if (ev.key === 'Enter') {
        this.gotoMatch(ev.shiftKey ? -1 : 1);
      } else if (ev.key === 'Escape') {
        this.searchInput.value = '';
        this.query = '';
        this.matchIndex = -1;
        this.redraw();
      }
      // Keep JupyterLab's notebook shortcuts (e.g. "a", "b", "dd") away from the input.
      ev.stopPropagation();
    });
    this.metricSelect.addEventListener('change', () => {
      this.metric = this.metricSelect.value;
      this.redraw();
      this.options.onMetric?.(this.metric);
    });
    toolbar.addEventListener('click', ev => {
      const action = (ev.target as HTMLElement).closest('[data-action]')?.getAttribute('data-action');
      if (action) {
        this.onAction(action);
      }
    });
    this.canvas.addEventListener('click', ev => this.onCanvasClick(ev));
    this.canvas.addEventListener('dblclick', ev => {
      const id = (ev.target as Element).closest('[data-id]')?.getAttribute('data-id');
      if (id && this.model.nodes.get(id)?.container) {
        this.toggle(id);
      }
    });
    this.canvas.addEventListener('wheel', ev => this.onWheel(ev), { passive: false });
    this.canvas.addEventListener('pointerdown', ev => this.onPointerDown(ev));
    this.canvas.addEventListener('pointermove', ev => this.onPointerMove(ev));
    this.canvas.addEventListener('pointerup', ev => this.onPointerUp(ev));
    this.canvas.addEventListener('pointercancel', ev => this.onPointerUp(ev));
    this.canvas.addEventListener('keydown', ev => this.onKey(ev));
    this.canvas.addEventListener('focusin', ev => {
      const id = (ev.target as Element).closest?.('[data-id]')?.getAttribute('data-id');
      if (id && id !== this.selected) {
        this.select(id);
        this.reveal(id);
      }
    });
    this.minimap.addEventListener('pointerdown', ev => {
      ev.stopPropagation();
      this.onMinimap(ev);
      this.minimap.setPointerCapture(ev.pointerId);
    });
    this.minimap.addEventListener('pointermove', ev => {
      if (ev.buttons & 1) {
        this.onMinimap(ev);
      }
    });
    this.root.ownerDocument.addEventListener('fullscreenchange', this.onFullscreenChange);
    // Focus (a click, Tab) scrolls even an overflow-hidden box to show the focused node; the view
    // is the viewBox alone, so undo that scroll and pan to the node instead.
    this.canvas.addEventListener('scroll', () => {
      this.canvas.scrollTop = 0;
      this.canvas.scrollLeft = 0;
    });
    if (typeof ResizeObserver !== 'undefined') {
      this.resizeObserver = new ResizeObserver(() => {
        const hgt = this.body.offsetHeight;
        if (this.setHeight && Math.abs(hgt - this.setHeight) > 2 && !this.root.classList.contains('mlg-full')) {
          this.userSized = true; // dragged the resize handle: auto height leaves it alone from now on
          this.setHeight = hgt;
        }
        // Attached after the first render, full screen, a resized window: fit again unless the user moved.
        if (!this.userMoved && this.graphLayout) {
          this.autoHeight();
          this.fitAll(this.readableFit);
        } else {
          this.applyView();
        }
      });
      this.resizeObserver.observe(this.body);
    }
    this.renderPanel();
  }

  private onAction(action: string): void {
    const cw = this.canvas.clientWidth;
    const ch = this.canvas.clientHeight;
    switch (action) {
      case 'expand-all':
        this.expanded = new Set(containerIds(this.model));
        void this.relayout({ refit: true });
        break;
      case 'collapse-all':
        this.expanded = new Set();
        void this.relayout({ refit: true });
        break;
      case 'zoom-in':
        this.userMoved = true;
        this.setView(zoomAt(this.view, 1.25, cw / 2, ch / 2));
        break;
      case 'zoom-out':
        this.userMoved = true;
        this.setView(zoomAt(this.view, 1 / 1.25, cw / 2, ch / 2));
        break;
      case 'zoom-fit':
        this.userMoved = false;
        this.readableFit = false;
        this.fitAll();
        break;
      case 'match-next':
        this.gotoMatch(1);
        break;
      case 'match-prev':
        this.gotoMatch(-1);
        break;
      case 'fullscreen':
        this.setFull(!this.root.classList.contains('mlg-full'));
        break;
      case 'export':
        this.exportSvg();
        break;
      case 'export-png':
        void this.exportPng();
        break;
    }
  }

  private onCanvasClick(ev: MouseEvent): void {
    if (this.suppressClick) {
      this.suppressClick = false; // the end of a drag, not a click
      return;
    }
    const target = ev.target as Element;
    const toggle = target.closest('[data-toggle]')?.getAttribute('data-toggle');
    if (toggle) {
      this.selected = toggle;
      this.toggle(toggle);
      return;
    }
    const id = target.closest('[data-id]')?.getAttribute('data-id');
    if (id) {
      this.select(id);
      return;
    }
    const edge = target.closest('[data-edge]')?.getAttribute('data-edge');
    this.select(null, edge ?? null);
  }

  private onWheel(ev: WheelEvent): void {
    if (!this.graphLayout) {
      return;
    }
    ev.preventDefault();
    this.userMoved = true;
    const r = this.canvas.getBoundingClientRect();
    this.setView(zoomAt(this.view, wheelFactor(ev.deltaY, ev.deltaMode), ev.clientX - r.left, ev.clientY - r.top));
  }

  private onPointerDown(ev: PointerEvent): void {
    if (ev.button !== 0 || (ev.target as Element).closest('[data-toggle]')) {
      return;
    }
    this.drag = { x: ev.clientX, y: ev.clientY, moved: false, pointer: ev.pointerId };
  }

  private onPointerMove(ev: PointerEvent): void {
    const d = this.drag;
    if (!d || d.pointer !== ev.pointerId) {
      return;
    }
    const dx = ev.clientX - d.x;
    const dy = ev.clientY - d.y;
    if (!d.moved && Math.hypot(dx, dy) < 4) {
      return; // a click, so far
    }
    if (!d.moved) {
      d.moved = true;
      // Capture only once it is a drag: a capture from pointerdown would retarget clicks on nodes.
      this.canvas.setPointerCapture(ev.pointerId);
      this.canvas.classList.add('mlg-panning');
    }
    d.x = ev.clientX;
    d.y = ev.clientY;
    this.userMoved = true;
    this.setView(panBy(this.view, dx, dy));
  }

  private onPointerUp(ev: PointerEvent): void {
    const d = this.drag;
    if (!d || d.pointer !== ev.pointerId) {
      return;
    }
    this.drag = null;
    if (d.moved) {
      this.suppressClick = true;
      setTimeout(() => (this.suppressClick = false), 0);
      this.canvas.classList.remove('mlg-panning');
      if (this.canvas.hasPointerCapture(ev.pointerId)) {
        this.canvas.releasePointerCapture(ev.pointerId);
      }
    }
  }

  private onKey(ev: KeyboardEvent): void {
    const dirs: Record<string, Direction> = { ArrowUp: 'up', ArrowDown: 'down', ArrowLeft: 'left', ArrowRight: 'right' };
    const layout = this.graphLayout;
    if (!layout) {
      return;
    }
    const current = this.selected && layout.nodes.some(n => n.id === this.selected) ? this.selected : null;
    let handled = true;
    if (dirs[ev.key]) {
      const next = current ? nearestInDirection(layout.nodes, current, dirs[ev.key]) : layout.nodes[0]?.id ?? null;
      if (next) {
        this.select(next);
        this.focusNode(next);
        this.reveal(next);
      }
    } else if (ev.key === 'Enter' && current) {
      if (this.model.nodes.get(current)?.container) {
        this.toggle(current);
      } else {
        this.select(current);
      }
    } else if (ev.key === 'Escape') {
      this.select(null);
      (ev.target as HTMLElement | SVGElement).blur?.();
    } else if (ev.key === '+' || ev.key === '=') {
      this.onAction('zoom-in');
    } else if (ev.key === '-') {
      this.onAction('zoom-out');
    } else if (ev.key === '0') {
      this.onAction('zoom-fit');
    } else {
      handled = false;
    }
    if (handled) {
      ev.preventDefault();
    }
    if (ev.key !== 'Tab') {
      // The notebook's command-mode shortcuts (arrows move cells, Enter edits) stay out of the graph.
      ev.stopPropagation();
    }
  }

  private onMinimap(ev: PointerEvent): void {
    const layout = this.graphLayout;
    if (!layout) {
      return;
    }
    const r = this.minimap.getBoundingClientRect();
    const gx = ((ev.clientX - r.left) / r.width) * layout.width;
    const gy = ((ev.clientY - r.top) / r.height) * layout.height;
    this.userMoved = true;
    this.setView(centerOn(this.view, gx, gy, this.canvas.clientWidth, this.canvas.clientHeight));
  }

  // ------------------------------------------------------------------ state changes
  private toggle(id: string): void {
    this.expanded = toggleExpanded(this.expanded, id);
    void this.relayout({ focus: id });
  }

  private matches(): string[] {
    return [...searchNodes(this.model, this.query)];
  }

  /** Moves to the next (1) or previous (-1) match: opens what hides it, selects it, pans to it. */
  private gotoMatch(step: 1 | -1): void {
    const list = this.matches();
    this.matchIndex = stepMatch(list.length, this.matchIndex, step);
    if (this.matchIndex < 0) {
      return;
    }
    const id = list[this.matchIndex];
    const opened = reveal(this.expanded, [id]);
    this.selected = id;
    this.selectedEdge = null;
    if (opened.size !== this.expanded.size) {
      this.expanded = opened;
      void this.relayout({ focus: id });
    } else {
      this.redraw();
      this.reveal(id);
    }
  }

  /** Selection moves classes and refills the panel: no redraw, so a double click still lands on one element. */
  private select(id: string | null, edge: string | null = null): void {
    this.selected = id;
    this.selectedEdge = id ? null : edge;
    this.markSelection();
    this.renderPanel();
  }

  private markSelection(): void {
    const svg = this.svg;
    const layout = this.graphLayout;
    if (!svg || !layout) {
      return;
    }
    svg.querySelectorAll('.mlg-selected, .mlg-neighbour, .mlg-edge-hot, .mlg-edge-selected').forEach(e =>
      e.classList.remove('mlg-selected', 'mlg-neighbour', 'mlg-edge-hot', 'mlg-edge-selected')
    );
    const byId = (id: string) => svg.querySelector(`[data-id="${CSS.escape(id)}"]`);
    const byEdge = (id: string) => svg.querySelector(`[data-edge="${CSS.escape(id)}"]`);
    const links = layout.edges.map(e => ({ id: e.id, source: e.link.source, target: e.link.target }));
    if (this.selected) {
      byId(this.selected)?.classList.add('mlg-selected');
      const nb = neighbours(links, this.selected);
      nb.nodes.forEach(n => byId(n)?.classList.add('mlg-neighbour'));
      nb.edges.forEach(e => byEdge(e)?.classList.add('mlg-edge-hot'));
    } else if (this.selectedEdge) {
      const e = layout.edges.find(x => x.id === this.selectedEdge);
      byEdge(this.selectedEdge)?.classList.add('mlg-edge-selected');
      if (e) {
        byId(e.link.source)?.classList.add('mlg-neighbour');
        byId(e.link.target)?.classList.add('mlg-neighbour');
      }
    }
  }

  private focusNode(id: string): void {
    const g = this.svg?.querySelector(`[data-id="${CSS.escape(id)}"]`) as SVGGElement | null;
    g?.focus({ preventScroll: true });
  }

  /** Pans so that node `id` is in view. */
  private reveal(id: string): void {
    const box = this.graphLayout?.nodes.find(n => n.id === id);
    if (box) {
      this.setView(ensureVisible(this.view, box, this.canvas.clientWidth, this.canvas.clientHeight));
    }
  }

  private async relayout(opts: { refit?: boolean; focus?: string } = {}): Promise<void> {
    const seq = ++this.layoutSeq;
    const hadFocus = this.canvas.contains(this.root.ownerDocument.activeElement);
    try {
      const elk = await getElk();
      const layout = await layoutGraph(elk, visibleGraph(this.model, this.expanded), this.expanded);
      if (seq !== this.layoutSeq) {
        return; // a newer expand/collapse superseded this one
      }
      this.graphLayout = layout;
      this.redraw();
      const first = !this.fitted;
      this.fitted = true;
      this.autoHeight();
      if (first || opts.refit || !this.userMoved) {
        this.readableFit = !opts.refit && !first;
        this.fitAll(this.readableFit);
      }
      const focus = opts.focus ?? this.selected;
      if (focus && !first) {
        this.reveal(focus);
      }
      if (hadFocus && focus) {
        this.focusNode(focus);
      }
      this.root.setAttribute('data-layouts', String(seq));
    } catch (e) {
      showError(this.root, `Cannot lay out this μGraph: ${(e as Error)?.message ?? String(e)}`);
    }
  }

  /** The canvas as tall as the graph at a readable zoom (after every expand), unless the user resized it. */
  private autoHeight(): void {
    const layout = this.graphLayout;
    if (!layout || this.userSized || this.root.classList.contains('mlg-full')) {
      return;
    }
    const cw = this.canvas.clientWidth || 600;
    const zoom = Math.max(0.5, Math.min(1, (cw - 16) / Math.max(layout.width, 1)));
    const max = Math.max(420, Math.round((this.root.ownerDocument.defaultView?.innerHeight ?? 900) * 0.8));
    // In the compact layout the side panel sits under the graph, in the same body.
    const panel = this.options.compact ? this.panel.offsetHeight : 0;
    const hgt = heightFor(layout.height, zoom, MIN_BODY_H, max) + panel;
    this.body.style.height = `${hgt}px`;
    this.setHeight = this.body.offsetHeight || hgt;
  }

  /** The whole graph in view; `keepReadable` stops at 50 % (a big graph then starts at its top). */
  private fitAll(keepReadable = false): void {
    const layout = this.graphLayout;
    if (!layout) {
      return;
    }
    const cw = this.canvas.clientWidth;
    const ch = this.canvas.clientHeight;
    if (cw <= 0 || ch <= 0) {
      return;
    }
    let v = fitView(layout.width, layout.height, cw, ch);
    if (keepReadable && v.zoom < 0.5) {
      v = { zoom: 0.5, x: layout.width / 2 - cw / 0.5 / 2, y: -8 / 0.5 };
    }
    this.setView(v);
  }

  private setView(v: View): void {
    this.view = v;
    this.applyView();
  }

  private applyView(): void {
    const layout = this.graphLayout;
    if (!this.svg || !layout) {
      return;
    }
    const cw = this.canvas.clientWidth;
    const ch = this.canvas.clientHeight;
    this.svg.setAttribute('width', String(cw));
    this.svg.setAttribute('height', String(ch));
    this.svg.setAttribute('viewBox', viewBox(this.view, cw, ch));
    this.root.setAttribute('data-zoom', this.view.zoom.toFixed(4));
    // The minimap shows where the view is, when part of the graph is out of it.
    const vw = cw / this.view.zoom;
    const vh = ch / this.view.zoom;
    const whole = this.view.x <= 1 && this.view.y <= 1 && this.view.x + vw >= layout.width - 1 && this.view.y + vh >= layout.height - 1;
    this.minimap.style.display = whole ? 'none' : '';
    this.minimapViewport?.setAttribute('x', String(this.view.x));
    this.minimapViewport?.setAttribute('y', String(this.view.y));
    this.minimapViewport?.setAttribute('width', String(vw));
    this.minimapViewport?.setAttribute('height', String(vh));
  }

  private drawMinimap(layout: Layout): void {
    const mm = this.minimap;
    mm.textContent = '';
    const k = Math.min(MINIMAP_W / Math.max(layout.width, 1), MINIMAP_H / Math.max(layout.height, 1));
    mm.setAttribute('width', String(Math.ceil(layout.width * k)));
    mm.setAttribute('height', String(Math.ceil(layout.height * k)));
    mm.setAttribute('viewBox', `0 0 ${Math.ceil(layout.width)} ${Math.ceil(layout.height)}`);
    mm.setAttribute('preserveAspectRatio', 'none');
    const rect = (n: LaidNode, cls: string) => {
      const r = document.createElementNS(SVG_NS, 'rect');
      r.setAttribute('class', cls);
      r.setAttribute('x', String(n.x));
      r.setAttribute('y', String(n.y));
      r.setAttribute('width', String(n.width));
      r.setAttribute('height', String(n.height));
      mm.appendChild(r);
    };
    for (const n of layout.nodes) {
      rect(n, n.expanded ? 'mlg-mm-frame' : `mlg-mm-node mlg-kind-${n.node.kind}`);
    }
    this.minimapViewport = document.createElementNS(SVG_NS, 'rect');
    this.minimapViewport.setAttribute('class', 'mlg-mm-view');
    mm.appendChild(this.minimapViewport);
  }

  private setFull(on: boolean): void {
    const doc = this.root.ownerDocument;
    this.userMoved = false; // the resize observer fits the graph to the new size
    this.readableFit = false;
    this.root.classList.toggle('mlg-full', on);
    if (on) {
      this.root.requestFullscreen?.().catch(() => undefined); // the CSS overlay stands in where it is refused
    } else if (doc.fullscreenElement === this.root) {
      void doc.exitFullscreen().catch(() => undefined);
    }
  }

  // ------------------------------------------------------------------ drawing
  /** Colours per visible node for the chosen metric, and the legend. */
  private metricFills(): Map<string, { fill: string; text: string }> | null {
    const m = this.model;
    this.legend.textContent = '';
    if (!this.metric || !this.graphLayout) {
      this.legend.style.display = 'none';
      return null;
    }
    const own = [...m.nodes.values()]
      .map(n => metricValue(m.metrics, n, this.metric))
      .filter((v): v is number => v !== null);
    const scale = colourScale(this.options.domain ? this.options.domain(this.metric) : own);
    const fills = new Map<string, { fill: string; text: string }>();
    if (!scale) {
      return fills;
    }
    for (const ln of this.graphLayout.nodes) {
      const v = metricValue(m.metrics, ln.node, this.metric);
      if (v !== null) {
        const fill = scale.colour(v);
        fills.set(ln.id, { fill, text: textColourOn(fill) });
      }
    }
    this.legend.style.display = '';
    h('span', { class: 'mlg-legend-title', text: `${this.metric}:` }, this.legend);
    for (const t of scale.ticks) {
      const item = h('span', { class: 'mlg-legend-item' }, this.legend);
      const sw = h('span', { class: 'mlg-swatch' }, item);
      sw.style.background = t.colour;
      h('span', { text: t.label }, item);
    }
    const nodata = h('span', { class: 'mlg-legend-item' }, this.legend);
    h('span', { class: 'mlg-swatch mlg-swatch-none' }, nodata);
    h('span', { text: 'no data' }, nodata);
    return fills;
  }

  /** Re-draws the SVG from the current layout (search, colour and view changes need no layout). */
  private redraw(): void {
    const layout = this.graphLayout;
    if (!layout) {
      return;
    }
    try {
      const list = this.matches();
      const matches = new Set(list);
      const highlight = highlightState(matches, layout.nodes.map(n => n.id), this.expanded);
      const shown = [...highlight.values()].filter(v => v === 'match').length;
      const hidden = matches.size - shown;
      const pos = this.matchIndex >= 0 && this.matchIndex < list.length ? `${this.matchIndex + 1}/` : '';
      this.countEl.textContent = this.query.trim()
        ? `${pos}${matches.size} match${matches.size === 1 ? '' : 'es'}${hidden > 0 ? ` (${hidden} hidden; Enter shows)` : ''}`
        : '';
      const hadFocus = this.canvas.contains(this.root.ownerDocument.activeElement);
      const svg = drawSvg(document, layout, {
        uid: this.uid,
        highlight,
        searching: this.query.trim() !== '',
        selected: this.selected,
        fills: this.metricFills()
      });
      this.svg?.remove();
      this.canvas.insertBefore(svg, this.minimap);
      this.svg = svg;
      this.drawMinimap(layout);
      this.applyView();
      this.markSelection();
      this.renderPanel();
      if (hadFocus && this.selected) {
        this.focusNode(this.selected);
      }
    } catch (e) {
      showError(this.root, `Cannot draw this μGraph: ${(e as Error)?.message ?? String(e)}`);
    }
  }

  private renderPanel(): void {
    const m = this.model;
    this.panel.textContent = '';
    const edge = this.selectedEdge ? this.graphLayout?.edges.find(e => e.id === this.selectedEdge) : undefined;
    if (edge) {
      const src = m.nodes.get(edge.link.source);
      const dst = m.nodes.get(edge.link.target);
      h('div', { class: 'mlg-panel-title', text: `tensor ${edge.link.label || '(no shape)'}` }, this.panel);
      h('div', { class: 'mlg-panel-sub', text: `edge · ${src?.level ?? ''} level` }, this.panel);
      this.renderSection('Edge', [
        ['from', `${src?.lines[0] ?? edge.link.source} (${edge.link.source})`],
        ['to', `${dst?.lines[0] ?? edge.link.target} (${edge.link.target})`],
        ['tensor', edge.link.tensor.replace(/^.*t(\d+)$/, 't$1')],
        ['shape · dtype', edge.link.label || '—']
      ]);
      return;
    }
    const node = this.selected ? m.nodes.get(this.selected) : undefined;
    if (!node) {
      const nodes = [...m.nodes.values()];
      const count = (pred: (n: (typeof nodes)[number]) => boolean) => String(nodes.filter(pred).length);
      h('div', { class: 'mlg-panel-title', text: 'μGraph' }, this.panel);
      h('div', { class: 'mlg-panel-hint', text: 'Click a node or an edge to see its attributes; + expands a customized op into its block graph, and a fused chain into its thread graph. Wheel zooms, drag pans; Tab and the arrow keys walk the graph, Enter expands.' }, this.panel);
      this.renderSection('Summary', [
        ['kernel inputs', count(n => n.kind === 'input')],
        ['kernel outputs', count(n => n.kind === 'output')],
        ['kernel ops', count(n => n.level === 'kernel' && (n.kind === 'op' || n.kind === 'customized'))],
        ['customized ops', count(n => n.kind === 'customized')],
        ['block ops', count(n => n.level !== 'kernel' && n.kind !== 'chain')],
        ['fused chains', count(n => n.kind === 'chain')]
      ]);
      return;
    }
    h('div', { class: 'mlg-panel-title', text: node.lines[0] }, this.panel);
    h('div', { class: 'mlg-panel-sub', text: `${node.level} level · ${node.kind} · ${node.id}` }, this.panel);
    for (const s of node.sections) {
      this.renderSection(s.title, s.rows);
    }
    const layout = this.graphLayout;
    if (layout) {
      const nb = neighbours(layout.edges.map(e => ({ id: e.id, source: e.link.source, target: e.link.target })), node.id);
      if (nb.nodes.size) {
        this.renderSection('Neighbours (highlighted)', [...nb.nodes].map(id => [id, m.nodes.get(id)?.lines[0] ?? id]));
      }
    }
  }

  private renderSection(title: string, rows: [string, string][]): void {
    const sec = h('div', { class: 'mlg-section' }, this.panel);
    h('div', { class: 'mlg-section-title', text: title }, sec);
    const table = h('table', { class: 'mlg-attrs' }, sec);
    for (const [k, v] of rows) {
      const tr = h('tr', {}, table);
      h('th', { text: k }, tr);
      h('td', { text: v }, tr);
    }
  }

  // ------------------------------------------------------------------ export
  private exportText(): string | null {
    const layout = this.graphLayout;
    return this.svg && layout ? serializeSvg(this.svg, layout.width, layout.height) : null;
  }

  private exportSvg(): void {
    const text = this.exportText();
    if (text) {
      download(new Blob([text], { type: 'image/svg+xml' }), `${this.options.fileStem ?? 'mugraph'}.svg`);
    }
  }

  /** The exported SVG drawn on a canvas at 2× (less for huge graphs), as a PNG download. */
  private async exportPng(): Promise<void> {
    const text = this.exportText();
    const layout = this.graphLayout;
    if (!text || !layout) {
      return;
    }
    // The exported SVG's size (whole layout units), times the scale.
    const w = Math.ceil(layout.width);
    const hgt = Math.ceil(layout.height);
    const scale = Math.min(PNG_SCALE, PNG_MAX_SIDE / Math.max(w, hgt, 1));
    const img = new Image();
    img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(text)}`;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = Math.round(w * scale);
    c.height = Math.round(hgt * scale);
    const ctx = c.getContext('2d');
    if (!ctx) {
      return;
    }
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, c.width, c.height);
    ctx.drawImage(img, 0, 0, c.width, c.height);
    const blob = await new Promise<Blob | null>(resolve => c.toBlob(resolve, 'image/png'));
    if (blob) {
      download(blob, `${this.options.fileStem ?? 'mugraph'}.png`);
    }
  }
}

/** The MIME renderer of one μGraph. */
export class MuGraphInspector extends Widget implements IRenderMime.IRenderer {
  private view: InspectorView | null = null;

  constructor(private readonly options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('mlg-root');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this.options.mimeType] ?? model.data[MIME_TYPE];
    this.view?.dispose();
    this.view = null;
    this.node.textContent = '';
    let graph: MuGraphJSON;
    try {
      graph = parseMuGraph(data);
      this.view = new InspectorView(this.node, graph);
    } catch (e) {
      showError(this.node, `Cannot show this μGraph: ${(e as Error).message}`, model.data['text/plain']);
      return;
    }
    await this.view.start();
  }

  dispose(): void {
    this.view?.dispose();
    super.dispose();
  }
}
