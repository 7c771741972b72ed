/**
 * The compare view (`application/vnd.mirage-lab.mugraph-compare+json`): two or more
 * candidates side by side, each a full inspector, under a table of their measured
 * numbers (each graph's `view.summary`). Both sides colour by the same metric on one
 * shared scale, so equal colours mean equal values across the candidates.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';
import { compareRows, sharedDomain } from './compare_data';
import { fmtNumber } from './format';
import { COMPARE_MIME_TYPE, parseCompare, type CompareJSON } from './mugraph';
import { h, InspectorView, showError } from './widget';

export class MuGraphCompare extends Widget implements IRenderMime.IRenderer {
  private views: InspectorView[] = [];

  constructor(private readonly options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('mlg-root');
    this.addClass('mlg-compare');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.disposeViews();
    this.node.textContent = '';
    let data: CompareJSON;
    try {
      data = parseCompare(model.data[this.options.mimeType] ?? model.data[COMPARE_MIME_TYPE]);
    } catch (e) {
      showError(this.node, `Cannot show this comparison: ${(e as Error).message}`, model.data['text/plain']);
      return;
    }
    this.renderTable(data);
    const row = h('div', { class: 'mlg-compare-row' }, this.node);
    const domains = new Map<string, number[]>();
    const domain = (metric: string) => {
      if (!domains.has(metric)) {
        domains.set(metric, sharedDomain(data, metric));
      }
      return domains.get(metric)!;
    };
    data.candidates.forEach((c, i) => {
      const cell = h('div', { class: 'mlg-compare-cell', attrs: { 'data-candidate': String(i) } }, row);
      h('div', { class: 'mlg-compare-label', text: c.label }, cell);
      const view = new InspectorView(cell, c.graph, {
        compact: true,
        domain,
        fileStem: c.label.replace(/[^\w.-]+/g, '_') || `candidate_${i}`,
        onMetric: metric => this.views.forEach(v => v !== view && v.setMetric(metric))
      });
      this.views.push(view);
    });
    await Promise.all(this.views.map(v => v.start()));
  }

  private renderTable(data: CompareJSON): void {
    const rows = compareRows(data);
    if (!rows.length) {
      return;
    }
    const table = h('table', { class: 'mlg-compare-table' }, this.node);
    const head = h('tr', {}, h('thead', {}, table));
    h('th', { text: '' }, head);
    data.candidates.forEach(c => h('th', { text: c.label }, head));
    const two = data.candidates.length === 2;
    if (two) {
      h('th', { text: `${data.candidates[1].label} / ${data.candidates[0].label}`, title: 'ratio of the two numbers' }, head);
    }
    const body = h('tbody', {}, table);
    for (const r of rows) {
      const tr = h('tr', {}, body);
      h('th', { text: r.key }, tr);
      for (const v of r.values) {
        h('td', { text: v === null ? '—' : typeof v === 'number' ? fmtNumber(v) : v }, tr);
      }
      if (two) {
        const [a, b] = r.values;
        const ratio = typeof a === 'number' && typeof b === 'number' && a !== 0 ? `${(b / a).toFixed(2)}×` : '';
        h('td', { class: 'mlg-ratio', text: ratio }, tr);
      }
    }
  }

  private disposeViews(): void {
    this.views.forEach(v => v.dispose());
    this.views = [];
  }

  dispose(): void {
    this.disposeViews();
    super.dispose();
  }
}
