import { describe, expect, it } from 'vitest';
import { colourScale, metricNames, metricValue, textColourOn, viridis } from '../src/metrics';
import { buildModel } from '../src/model';
import { parseMuGraph } from '../src/mugraph';
import { highlightState, searchNodes } from '../src/search';
import { gqa, rms, rmsRaw } from './fixtures';

describe('searchNodes', () => {
  const m = buildModel(rms());
  const find = (q: string) => [...searchNodes(m, q)].sort();

  it('matches types, kinds and accumulator kinds at every level', () => {
    expect(find('matmul')).toEqual(['k2/c3', 'k2/c3/b3']);
    expect(find('rms')).toEqual(['k2/b2']);
    expect(find('loader')).toEqual(['k2/b0', 'k2/b1']);
    expect(find('customized')).toEqual(['k2']);
  });

  it('matches shapes written with x or ×, and needs every term', () => {
    expect(find('16x4096')).toEqual(find('16×4096'));
    expect(find('16x4096')).toContain('k0');
    expect(find('16x4096')).toContain('out2');
    expect(find('loader x→1')).toEqual(['k2/b1']);
    expect(find('loader nosuchthing')).toEqual([]);
  });

  it('an empty query matches nothing', () => {
    expect(find('   ')).toEqual([]);
  });

  it('marks collapsed containers that hold a match', () => {
    const matches = searchNodes(m, 'rms');
    const collapsed = highlightState(matches, ['k0', 'k1', 'k2', 'out2'], new Set());
    expect(collapsed.get('k2')).toBe('contains');
    expect(collapsed.get('k0')).toBe('none');
    const open = highlightState(matches, ['k2', 'k2/b2', 'k2/b0'], new Set(['k2']));
    expect(open.get('k2/b2')).toBe('match');
    expect(open.get('k2')).toBe('contains');
    expect(open.get('k2/b0')).toBe('none');
  });
});

describe('metrics', () => {
  const d = rmsRaw();
  d.metrics = { op2: { latency_us: 12.1, note: 'fast', bytes: 5 }, op0: { latency_us: 2, bad: NaN } };
  const g = parseMuGraph(d);
  const m = buildModel(g);

  it('lists only numeric metric names', () => {
    expect(metricNames(g.metrics)).toEqual(['bytes', 'latency_us']);
    expect(metricNames(undefined)).toEqual([]);
    expect(metricNames(gqa().metrics)).toEqual([]);
  });

  it('reads values by the op<id> key; block ops and outputs have none', () => {
    expect(metricValue(g.metrics, m.nodes.get('k2')!, 'latency_us')).toBe(12.1);
    expect(metricValue(g.metrics, m.nodes.get('k1')!, 'latency_us')).toBeNull();
    expect(metricValue(g.metrics, m.nodes.get('k2/b0')!, 'latency_us')).toBeNull();
    expect(metricValue(g.metrics, m.nodes.get('k2')!, 'note')).toBeNull();
  });

  it('scales linearly from dark to bright viridis', () => {
    const s = colourScale([2, 12.1, 7.05])!;
    expect(s.min).toBe(2);
    expect(s.max).toBe(12.1);
    expect(s.colour(2)).toBe('#440154');
    expect(s.colour(12.1)).toBe('#fde725');
    expect(s.colour(7.05)).toBe(viridis(0.5));
    expect(s.ticks.map(t => t.label)).toEqual(['2', '4.525', '7.05', '9.575', '12.1']);
    expect(colourScale([])).toBeNull();
    const one = colourScale([3])!;
    expect(one.colour(3)).toBe(viridis(0.5));
    expect(one.ticks).toHaveLength(1);
  });

  it('interpolates between stops and clamps', () => {
    expect(viridis(-1)).toBe('#440154');
    expect(viridis(2)).toBe('#fde725');
    expect(viridis(0.0625)).toBe('#461768'); // halfway between the first two stops
    expect(textColourOn('#440154')).toBe('#ffffff');
    expect(textColourOn('#fde725')).toBe('#111111');
  });
});
