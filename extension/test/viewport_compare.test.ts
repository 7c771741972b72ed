import { describe, expect, it } from 'vitest';
import { compareRows, sharedDomain } from '../src/compare_data';
import { buildModel, expandedForLevel } from '../src/model';
import { COMPARE_FORMAT, parseCompare, parseMuGraph } from '../src/mugraph';
import {
  centerOn,
  ensureVisible,
  fitView,
  heightFor,
  MAX_ZOOM,
  nearestInDirection,
  neighbours,
  panBy,
  stepMatch,
  viewBox,
  wheelFactor,
  zoomAt
} from '../src/viewport';
import { gqaRaw, rms, rmsRaw } from './fixtures';

describe('pan and zoom', () => {
  it('fit shows the whole graph centred and never magnifies past 1', () => {
    const v = fitView(1000, 500, 500, 500, 0);
    expect(v.zoom).toBeCloseTo(0.5);
    expect(viewBox(v, 500, 500)).toBe('0 -250 1000 1000');
    expect(fitView(100, 100, 800, 800).zoom).toBe(1);
  });

  it('wheel zoom keeps the point under the mouse fixed', () => {
    const v = { x: 10, y: 20, zoom: 1 };
    const z = zoomAt(v, wheelFactor(-100), 200, 100);
    expect(z.zoom).toBeCloseTo(1.2);
    expect(z.x + 200 / z.zoom).toBeCloseTo(v.x + 200);
    expect(z.y + 100 / z.zoom).toBeCloseTo(v.y + 100);
    expect(zoomAt(v, 1e6, 0, 0).zoom).toBe(MAX_ZOOM);
    expect(wheelFactor(3, 1)).toBeCloseTo(wheelFactor(48, 0)); // line-mode deltas count as 16 px
  });

  it('drag moves the graph with the pointer at any zoom', () => {
    expect(panBy({ x: 0, y: 0, zoom: 2 }, 40, -20)).toEqual({ x: -20, y: 10, zoom: 2 });
    expect(centerOn({ x: 0, y: 0, zoom: 2 }, 100, 100, 400, 200)).toEqual({ x: 0, y: 50, zoom: 2 });
  });

  it('ensureVisible pans only as far as needed', () => {
    const v = { x: 0, y: 0, zoom: 1 };
    expect(ensureVisible(v, { id: 'a', x: 30, y: 30, width: 20, height: 20 }, 100, 100)).toEqual(v);
    expect(ensureVisible(v, { id: 'a', x: 10, y: 30, width: 20, height: 20 }, 100, 100).x).toBe(-6); // keeps a 16 px margin
    expect(ensureVisible(v, { id: 'a', x: 200, y: 10, width: 20, height: 20 }, 100, 100, 10).x).toBe(130);
  });

  it('auto height fits the graph between the bounds', () => {
    expect(heightFor(300, 1, 200, 800)).toBe(332);
    expect(heightFor(3000, 1, 200, 800)).toBe(800);
    expect(heightFor(10, 1, 200, 800)).toBe(200);
  });
});

describe('keyboard navigation, neighbours and matches', () => {
  const boxes = [
    { id: 'top', x: 100, y: 0, width: 50, height: 20 },
    { id: 'mid', x: 100, y: 100, width: 50, height: 20 },
    { id: 'side', x: 300, y: 110, width: 50, height: 20 },
    { id: 'low', x: 90, y: 200, width: 50, height: 20 }
  ];
  it('arrows move to the nearest node in that direction', () => {
    expect(nearestInDirection(boxes, 'top', 'down')).toBe('mid');
    expect(nearestInDirection(boxes, 'mid', 'down')).toBe('low');
    expect(nearestInDirection(boxes, 'mid', 'right')).toBe('side');
    expect(nearestInDirection(boxes, 'side', 'left')).toBe('mid');
    expect(nearestInDirection(boxes, 'top', 'up')).toBeNull();
  });

  it('neighbours are the nodes and links touching a node', () => {
    const links = [
      { id: 'e1', source: 'a', target: 'b' },
      { id: 'e2', source: 'b', target: 'c' },
      { id: 'e3', source: 'c', target: 'd' }
    ];
    const nb = neighbours(links, 'b');
    expect([...nb.nodes].sort()).toEqual(['a', 'c']);
    expect([...nb.edges].sort()).toEqual(['e1', 'e2']);
  });

  it('next and previous match wrap around', () => {
    expect(stepMatch(3, -1, 1)).toBe(0);
    expect(stepMatch(3, -1, -1)).toBe(2);
    expect(stepMatch(3, 2, 1)).toBe(0);
    expect(stepMatch(3, 0, -1)).toBe(2);
    expect(stepMatch(0, 0, 1)).toBe(-1);
  });
});

describe('view hints and the compare bundle', () => {
  it('expand levels open the right containers', () => {
    const m = buildModel(rms());
    expect([...expandedForLevel(m, 'kernel')]).toEqual([]);
    expect([...expandedForLevel(m, 'block')]).toEqual(['k2']);
    expect([...expandedForLevel(m, 'all')].sort()).toEqual(['k2', 'k2/c3']);
  });

  it('view hints are checked like any field', () => {
    const g = parseMuGraph({ ...rmsRaw(), view: { metric: 'latency_us', expand: 'block', summary: { latency_us: 12.5, device: 'H100' } } });
    expect(g.view).toEqual({ metric: 'latency_us', expand: 'block', summary: { latency_us: 12.5, device: 'H100' } });
    expect(() => parseMuGraph({ ...rmsRaw(), view: { expand: 'blocks' } })).toThrow(/view.expand: expected one of kernel, block, thread, all/);
    expect(() => parseMuGraph({ ...rmsRaw(), view: { summary: { x: [1] } } })).toThrow(/view.summary.x: expected a number or text/);
  });

  const bundle = () => ({
    format: COMPARE_FORMAT,
    version: 1,
    candidates: [
      { label: 'A', graph: { ...gqaRaw(), metrics: { op3: { latency_us: 30 } }, view: { summary: { latency_us: 40, device: 'H100' } } } },
      { label: 'B', graph: { ...gqaRaw(), metrics: { op3: { latency_us: 10 }, op4: { latency_us: 5 } }, view: { summary: { latency_us: 20 } } } }
    ]
  });

  it('a comparison holds labelled graphs; its table and colour scale span both', () => {
    const c = parseCompare(bundle());
    expect(c.candidates.map(x => x.label)).toEqual(['A', 'B']);
    expect(compareRows(c)).toEqual([
      { key: 'latency_us', values: [40, 20] },
      { key: 'device', values: ['H100', null] }
    ]);
    expect(sharedDomain(c, 'latency_us').sort((a, b) => a - b)).toEqual([5, 10, 30]);
  });

  it('a bad comparison names the bad field', () => {
    expect(() => parseCompare({ ...bundle(), candidates: [bundle().candidates[0]] })).toThrow(/candidates: expected a list of at least two/);
    const bad = bundle();
    (bad.candidates[1].graph as any).kernel_graph = 3;
    expect(() => parseCompare(bad)).toThrow(/candidates\[1\]\.graph\.kernel_graph: expected an object/);
    expect(() => parseCompare({ ...bundle(), format: 'x' })).toThrow(/format: expected "mirage_lab.mugraph-compare"/);
  });
});
