/**
 * The output-area widget: toolbar (search, metric colouring, expand/collapse,
 * zoom, export), the SVG graph and a side panel of the clicked node's attributes.
 *
 * It never throws into JupyterLab: any failure (bad data, a layout error) turns
 * into a message in the output, followed by the bundle's text/plain, so a broken
 * or newer-format graph still shows something useful.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';
import { drawSvg, serializeSvg } from './draw';
import { layoutGraph, type ElkLike, type Layout } from './layout';
import { colourScale, metricNames, metricValue, textColourOn } from './metrics';
import { buildModel, containerIds, reveal, toggleExpanded, visibleGraph, type GraphModel } from './model';
import { MIME_TYPE, parseMuGraph } from './mugraph';
import { highlightState, searchNodes } from './search';

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

function h<K extends keyof HTMLElementTagNameMap>(
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

export class MuGraphInspector extends Widget implements IRenderMime.IRenderer {
  private model: GraphModel | null = null;
  private expanded = new Set<string>();
  private selected: string | null = null;
  private query = '';
  private metric = '';
  private zoom = 1;
  private fitted = false;
  private graphLayout: Layout | null = null;
  private svg: SVGSVGElement | null = null;
  private layoutSeq = 0;
  private readonly uid = `g${++uidCounter}`;

  private toolbar!: HTMLDivElement;
  private searchInput!: HTMLInputElement;
  private countEl!: HTMLSpanElement;
  private metricSelect!: HTMLSelectElement;
  private legend!: HTMLDivElement;
  private body!: HTMLDivElement;
  private canvas!: HTMLDivElement;
  private panel!: HTMLDivElement;

  constructor(private readonly options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('mlg-root');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this.options.mimeType] ?? model.data[MIME_TYPE];
    try {
      const graph = parseMuGraph(data);
      this.model = buildModel(graph);
    } catch (e) {
      this.showError(`Cannot show this μGraph: ${(e as Error).message}`, model);
      return;
    }
    this.expanded = new Set();
    this.selected = null;
    this.fitted = false;
    this.buildChrome();
    await this.relayout(model);
  }

  private showError(message: string, model?: IRenderMime.IMimeModel): void {
    this.node.textContent = '';
    const box = h('div', { class: 'mlg-error' }, this.node);
    h('div', { class: 'mlg-error-msg', text: message }, box);
    const text = model?.data['text/plain'];
    if (typeof text === 'string' && text) {
      h('pre', { class: 'mlg-error-text', text }, box);
    }
  }

  private buildChrome(): void {
    const m = this.model!;
    this.node.textContent = '';
    this.toolbar = h('div', { class: 'mlg-toolbar' }, this.node);
    h('span', { class: 'mlg-title', text: 'μGraph' }, this.toolbar);
    this.searchInput = h('input', {
      class: 'mlg-search',
      title: 'Highlight nodes whose type, id, shape, dtype or attributes contain every word; Enter expands to show them',
      attrs: { type: 'search', placeholder: 'Search ops, shapes, maps…', 'aria-label': 'Search nodes' }
    }, this.toolbar);
    this.countEl = h('span', { class: 'mlg-count' }, this.toolbar);
    const names = metricNames(m.metrics);
    const metricLabel = h('label', { class: 'mlg-metric-label', text: 'Colour: ' }, this.toolbar);
    this.metricSelect = h('select', { class: 'mlg-metric', attrs: { 'aria-label': 'Colour nodes by' } }, metricLabel);
    h('option', { text: 'node kind', attrs: { value: '' } }, this.metricSelect);
    for (const n of names) {
      h('option', { text: n, attrs: { value: n } }, this.metricSelect);
    }
    if (!names.length) {
      this.metricSelect.disabled = true;
      this.metricSelect.title = 'This μGraph carries no numeric metrics';
    }
    const buttons: [string, string, string][] = [
      ['expand-all', 'Expand all', 'Show every block and thread graph'],
      ['collapse-all', 'Collapse all', 'Show the kernel graph only'],
      ['zoom-out', '−', 'Zoom out'],
      ['zoom-fit', 'Fit', 'Fit the width of the output'],
      ['zoom-in', '+', 'Zoom in'],
      ['export', 'Export SVG', 'Download the current view as an SVG file']
    ];
    for (const [action, text, title] of buttons) {
      h('button', { class: 'mlg-btn', text, title, attrs: { 'data-action': action, type: 'button' } }, this.toolbar);
    }
    this.legend = h('div', { class: 'mlg-legend' }, this.node);
    this.body = h('div', { class: 'mlg-body' }, this.node);
    this.canvas = h('div', { class: 'mlg-canvas' }, this.body);
    this.panel = h('div', { class: 'mlg-panel' }, this.body);

    this.searchInput.addEventListener('input', () => {
      this.query = this.searchInput.value;
      this.redraw();
    });
    this.searchInput.addEventListener('keydown', ev => {
      if (ev.key === 'Enter') {
        const matches = searchNodes(this.model!, this.query);
        if (matches.size) {
          this.expanded = reveal(this.expanded, matches);
          this.selected = [...matches][0];
          void this.relayout();
        }
      } else if (ev.key === 'Escape') {
        this.searchInput.value = '';
        this.query = '';
        this.redraw();
      }
      // Keep JupyterLab's notebook shortcuts (e.g. "a", "b", "dd") away from the input.
      ev.stopPropagation();
    });
    this.metricSelect.addEventListener('change', () => {
      this.metric = this.metricSelect.value;
      this.redraw();
    });
    this.toolbar.addEventListener('click', ev => {
      const action = (ev.target as HTMLElement).closest('[data-action]')?.getAttribute('data-action');
      if (action) {
        this.onAction(action);
      }
    });
    this.canvas.addEventListener('click', ev => this.onCanvasClick(ev));
    this.canvas.addEventListener('dblclick', ev => {
      const id = (ev.target as Element).closest('[data-id]')?.getAttribute('data-id');
      if (id && this.model?.nodes.get(id)?.container) {
        this.expanded = toggleExpanded(this.expanded, id);
        void this.relayout();
      }
    });
    this.renderPanel();
  }

  private onAction(action: string): void {
    const m = this.model;
    if (!m) {
      return;
    }
    switch (action) {
      case 'expand-all':
        this.expanded = new Set(containerIds(m));
        void this.relayout();
        break;
      case 'collapse-all':
        this.expanded = new Set();
        void this.relayout();
        break;
      case 'zoom-in':
        this.setZoom(this.zoom * 1.25);
        break;
      case 'zoom-out':
        this.setZoom(this.zoom / 1.25);
        break;
      case 'zoom-fit':
        this.fitWidth();
        break;
      case 'export':
        this.exportSvg();
        break;
    }
  }

  private onCanvasClick(ev: MouseEvent): void {
    const target = ev.target as Element;
    const toggle = target.closest('[data-toggle]')?.getAttribute('data-toggle');
    if (toggle) {
      this.expanded = toggleExpanded(this.expanded, toggle);
      this.selected = toggle;
      void this.relayout();
      return;
    }
    this.select(target.closest('[data-id]')?.getAttribute('data-id') ?? null);
  }

  /** Selection only moves a class and refills the panel: no redraw, so a double click still lands on one element. */
  private select(id: string | null): void {
    this.selected = id;
    this.svg?.querySelectorAll('.mlg-selected').forEach(e => e.classList.remove('mlg-selected'));
    if (id) {
      this.svg?.querySelector(`[data-id="${CSS.escape(id)}"]`)?.classList.add('mlg-selected');
    }
    this.renderPanel();
  }

  private async relayout(model?: IRenderMime.IMimeModel): Promise<void> {
    const m = this.model;
    if (!m) {
      return;
    }
    const seq = ++this.layoutSeq;
    try {
      const elk = await getElk();
      const layout = await layoutGraph(elk, visibleGraph(m, this.expanded), this.expanded);
      if (seq !== this.layoutSeq) {
        return; // a newer expand/collapse superseded this one
      }
      this.graphLayout = layout;
      if (!this.fitted) {
        this.fitted = true;
        this.fitInitial();
        // Tall enough for the collapsed graph, capped so a big graph does not push the notebook away;
        // the body's resize handle gives more room.
        this.body.style.height = `${Math.max(240, Math.min(600, Math.ceil(layout.height * this.zoom) + 24))}px`;
      }
      this.redraw();
    } catch (e) {
      this.showError(`Cannot lay out this μGraph: ${(e as Error)?.message ?? String(e)}`, model);
    }
  }

  /** Colours per visible node for the chosen metric, and the legend. */
  private metricFills(): Map<string, { fill: string; text: string }> | null {
    const m = this.model!;
    this.legend.textContent = '';
    if (!this.metric || !this.graphLayout) {
      this.legend.style.display = 'none';
      return null;
    }
    const all = [...m.nodes.values()]
      .map(n => metricValue(m.metrics, n, this.metric))
      .filter((v): v is number => v !== null);
    const scale = colourScale(all);
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

  /** Re-draws the SVG from the current layout (search, selection, colour changes need no layout). */
  private redraw(): void {
    const m = this.model;
    if (!m || !this.graphLayout) {
      return;
    }
    try {
      const matches = searchNodes(m, this.query);
      const visibleIds = this.graphLayout.nodes.map(n => n.id);
      const highlight = highlightState(matches, visibleIds, this.expanded);
      const shown = [...highlight.values()].filter(v => v === 'match').length;
      this.countEl.textContent = this.query.trim()
        ? `${matches.size} match${matches.size === 1 ? '' : 'es'}${matches.size > shown ? ` (${matches.size - shown} hidden; Enter shows)` : ''}`
        : '';
      const svg = drawSvg(document, this.graphLayout, {
        uid: this.uid,
        highlight,
        searching: this.query.trim() !== '',
        selected: this.selected,
        fills: this.metricFills()
      });
      const scroll = { left: this.canvas.scrollLeft, top: this.canvas.scrollTop };
      this.canvas.textContent = '';
      this.canvas.appendChild(svg);
      this.svg = svg;
      this.applyZoom();
      this.canvas.scrollLeft = scroll.left;
      this.canvas.scrollTop = scroll.top;
      this.renderPanel();
    } catch (e) {
      this.showError(`Cannot draw this μGraph: ${(e as Error)?.message ?? String(e)}`);
    }
  }

  private renderPanel(): void {
    const m = this.model;
    if (!m) {
      return;
    }
    this.panel.textContent = '';
    const node = this.selected ? m.nodes.get(this.selected) : undefined;
    if (!node) {
      const nodes = [...m.nodes.values()];
      const count = (pred: (n: (typeof nodes)[number]) => boolean) => String(nodes.filter(pred).length);
      h('div', { class: 'mlg-panel-title', text: 'μGraph' }, this.panel);
      h('div', { class: 'mlg-panel-hint', text: 'Click a node to see its attributes; + expands a customized op into its block graph, and a fused chain into its thread graph.' }, this.panel);
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

  private fitInitial(): void {
    const avail = this.canvas.clientWidth;
    const w = this.graphLayout?.width ?? 0;
    // Shrink wide graphs to the output's width, but never below a readable size.
    this.zoom = avail > 0 && w > avail ? Math.max(0.5, avail / w) : 1;
  }

  private fitWidth(): void {
    const w = this.graphLayout?.width ?? 0;
    const avail = this.canvas.clientWidth - 4;
    if (w > 0 && avail > 0) {
      this.setZoom(avail / w);
    }
  }

  private setZoom(z: number): void {
    this.zoom = Math.min(4, Math.max(0.2, z));
    this.applyZoom();
  }

  private applyZoom(): void {
    if (!this.svg || !this.graphLayout) {
      return;
    }
    this.svg.setAttribute('width', String(Math.ceil(this.graphLayout.width * this.zoom)));
    this.svg.setAttribute('height', String(Math.ceil(this.graphLayout.height * this.zoom)));
  }

  private exportSvg(): void {
    if (!this.svg) {
      return;
    }
    const blob = new Blob([serializeSvg(this.svg)], { type: 'image/svg+xml' });
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = 'mugraph.svg';
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
}
