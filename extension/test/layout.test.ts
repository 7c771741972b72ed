import ELK from 'elkjs/lib/elk.bundled.js';
import { describe, expect, it } from 'vitest';
import { layoutGraph, nodeSize, textWidth, toElkGraph, type Layout } from '../src/layout';
import { buildModel, containerIds, visibleGraph } from '../src/model';
import { gqa, rms } from './fixtures';

const elk = new ELK();

function box(l: Layout, id: string) {
  const n = l.nodes.find(x => x.id === id);
  if (!n) {
    throw new Error(`no node ${id}`);
  }
  return n;
}

function inside(a: { x: number; y: number; width: number; height: number }, b: typeof a) {
  return a.x >= b.x && a.y >= b.y && a.x + a.width <= b.x + b.width && a.y + a.height <= b.y + b.height;
}

function overlap(a: { x: number; y: number; width: number; height: number }, b: typeof a) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

describe('toElkGraph', () => {
  it('nests expanded containers and keeps edges at the root', () => {
    const m = buildModel(rms());
    const expanded = new Set(['k2']);
    const g = toElkGraph(visibleGraph(m, expanded), expanded);
    expect(g.children!.map(c => c.id)).toEqual(['k0', 'k1', 'k2', 'out2']);
    const k2 = g.children!.find(c => c.id === 'k2')!;
    expect(k2.children!.map(c => c.id).sort()).toEqual(['k2/b0', 'k2/b1', 'k2/b2', 'k2/b5', 'k2/b6', 'k2/c3']);
    expect(k2.width).toBeUndefined(); // sized by ELK around its children
    expect(g.edges!.find(e => e.sources[0] === 'k0')!.targets).toEqual(['k2/b0']);
    expect(g.edges!.every(e => (e.labels ?? []).length === 1)).toBe(true);
    expect(toElkGraph(visibleGraph(m, expanded), expanded, { edgeLabels: false }).edges!.every(e => !e.labels!.length)).toBe(true);
  });

  it('sizes boxes to fit their longest line', () => {
    const m = buildModel(rms());
    const loader = m.nodes.get('k2/b0')!;
    const s = nodeSize(loader);
    expect(s.width).toBeGreaterThanOrEqual(textWidth('imap {} fmap 1', 11) + 20);
    expect(s.height).toBe(3 * 15 + 14);
    expect(nodeSize(m.nodes.get('k2')!).width).toBeGreaterThan(textWidth('grid 256×1×1 · loop ×32', 11));
  });
});

describe('layoutGraph with ELK', () => {
  it('lays the kernel graph out top to bottom', async () => {
    const m = buildModel(rms());
    const l = await layoutGraph(elk, visibleGraph(m, new Set()), new Set());
    expect(l.nodes.map(n => n.id).sort()).toEqual(['k0', 'k1', 'k2', 'out2']);
    expect(box(l, 'k0').y).toBeLessThan(box(l, 'k2').y);
    expect(box(l, 'k2').y).toBeLessThan(box(l, 'out2').y);
    expect(l.edges).toHaveLength(3);
    for (const e of l.edges) {
      expect(e.points.length).toBeGreaterThanOrEqual(2);
      const src = box(l, e.link.source);
      const dst = box(l, e.link.target);
      const first = e.points[0];
      const last = e.points[e.points.length - 1];
      // edges leave the bottom of the source and enter the top of the target
      expect(first.y).toBeCloseTo(src.y + src.height, 0);
      expect(last.y).toBeCloseTo(dst.y, 0);
      expect(e.label).not.toBeNull();
    }
  });

  for (const [name, graph] of [
    ['rms', rms],
    ['gqa', gqa]
  ] as const) {
    it(`${name}, everything expanded: children inside parents, siblings apart, absolute coordinates`, async () => {
      const m = buildModel(graph());
      const expanded = new Set(containerIds(m));
      const view = visibleGraph(m, expanded);
      const l = await layoutGraph(elk, view, expanded);
      expect(l.nodes).toHaveLength(view.nodes.length);
      expect(l.edges).toHaveLength(view.links.length);
      for (const n of l.nodes) {
        expect(n.x + n.width).toBeLessThanOrEqual(l.width);
        expect(n.y + n.height).toBeLessThanOrEqual(l.height);
        if (n.node.parent) {
          expect(inside(n, box(l, n.node.parent))).toBe(true);
        }
      }
      for (const a of l.nodes) {
        for (const b of l.nodes) {
          if (a.id < b.id && a.node.parent === b.node.parent) {
            expect(overlap(a, b), `${a.id} overlaps ${b.id}`).toBe(false);
          }
        }
      }
      // an expanded container is at least as wide as its header text
      for (const n of l.nodes.filter(x => x.expanded)) {
        expect(n.width).toBeGreaterThanOrEqual(textWidth(n.node.header, 11));
      }
    });
  }
});
