import { describe, expect, it } from 'vitest';
import {
  ancestors,
  buildModel,
  containerIds,
  fusionChains,
  representative,
  reveal,
  toggleExpanded,
  visibleGraph
} from '../src/model';
import { parseMuGraph } from '../src/mugraph';
import { gqa, rms, rmsRaw } from './fixtures';

const ids = (xs: { id: string }[]) => xs.map(x => x.id).sort();
const pairs = (ls: { source: string; target: string }[]) => ls.map(l => `${l.source}->${l.target}`).sort();

describe('buildModel (RMSNorm + Linear, one customized op)', () => {
  const m = buildModel(rms());

  it('has kernel, block and thread nodes with path ids', () => {
    expect(ids([...m.nodes.values()])).toEqual(
      ['k0', 'k1', 'k2', 'k2/b0', 'k2/b1', 'k2/b2', 'k2/b5', 'k2/b6', 'k2/c3', 'k2/c3/b3', 'k2/c3/b4', 'out2'].sort()
    );
    expect(m.nodes.get('k2')!.kind).toBe('customized');
    expect(m.nodes.get('k2/b0')!.kind).toBe('loader');
    expect(m.nodes.get('k2/b2')!.kind).toBe('accumulator');
    expect(m.nodes.get('k2/b6')!.kind).toBe('saver');
    expect(m.nodes.get('k2/c3')!.kind).toBe('chain');
    expect(m.nodes.get('k2/c3/b3')!.level).toBe('thread');
    expect(m.nodes.get('k2/b5')!.level).toBe('block');
  });

  it('shows loaders with imap/fmap, accumulators with their kind, savers with omap', () => {
    expect(m.nodes.get('k2/b1')!.lines).toEqual(['loader 1', 'imap {x→1} fmap 0', '128×16 f16']);
    expect(m.nodes.get('k2/b0')!.lines[1]).toBe('imap {} fmap 1');
    expect(m.nodes.get('k2/b2')!.lines[0]).toBe('accum rms');
    expect(m.nodes.get('k2/c3/b4')!.lines[0]).toBe('accum');
    expect(m.nodes.get('k2/b6')!.lines).toEqual(['saver 0', 'omap {x→1}', '→ 16×4096']);
    expect(m.nodes.get('k2/c3')!.lines[0]).toBe('fused: matmul → accum(none)');
    const customized = m.nodes.get('k2')!;
    const launch = customized.sections.find(s => s.title === 'Launch')!.rows;
    expect(launch).toContainEqual(['grid_dim', '[256,1,1]']);
    expect(launch).toContainEqual(['forloop_range', '32']);
    const acc = m.nodes.get('k2/b2')!.sections.find(s => s.title === 'Accumulator')!.rows;
    expect(acc).toContainEqual(['kind (acc)', 'rms']);
    expect(acc).toContainEqual(['after_accum', 'true']);
    const loader = m.nodes.get('k2/b1')!.sections.find(s => s.title === 'Loader')!.rows;
    expect(loader).toContainEqual(['kernel tensor', 't1: 4096×4096 float16']);
    expect(loader).toContainEqual(['fmap (forloop_dim)', '0']);
    expect(loader).toContainEqual(['imap', '[1,-1,-1]  {x→1}']);
    const gqaLoader = buildModel(gqa()).nodes.get('k4/b0')!.sections.find(s => s.title === 'Loader')!.rows;
    expect(gqaLoader).toContainEqual(['fmap (forloop_dim)', '-1 (none: the same tile every iteration)']);
  });

  it('links kernel tensors to the loaders and savers of the customized op', () => {
    expect(pairs(m.links)).toEqual(
      [
        'k0->k2/b0', // X into loader 0
        'k1->k2/b1', // W into loader 1
        'k2/b6->out2', // saver 0 to the graph output
        'k2/b0->k2/b2',
        'k2/b0->k2/c3/b3',
        'k2/b1->k2/c3/b3',
        'k2/c3/b3->k2/c3/b4',
        'k2/c3/b4->k2/b5',
        'k2/b2->k2/b5',
        'k2/b5->k2/b6'
      ].sort()
    );
  });

  it('collapsed: the kernel graph only, links re-targeted to the customized op', () => {
    const v = visibleGraph(m, new Set());
    expect(ids(v.nodes)).toEqual(['k0', 'k1', 'k2', 'out2']);
    expect(pairs(v.links)).toEqual(['k0->k2', 'k1->k2', 'k2->out2']);
    expect(v.links.find(l => l.source === 'k0')!.label).toBe('16×4096 f16');
  });

  it('expanding the customized op shows its block graph with the chain collapsed', () => {
    const v = visibleGraph(m, new Set(['k2']));
    expect(ids(v.nodes)).toEqual(['k0', 'k1', 'k2', 'k2/b0', 'k2/b1', 'k2/b2', 'k2/b5', 'k2/b6', 'k2/c3', 'out2']);
    expect(pairs(v.links)).toContain('k2/b0->k2/c3');
    expect(pairs(v.links)).toContain('k2/c3->k2/b5');
    expect(pairs(v.links)).not.toContain('k2/c3->k2/c3');
    // parents come before children, as the layout needs
    const order = v.nodes.map(n => n.id);
    expect(order.indexOf('k2')).toBeLessThan(order.indexOf('k2/b0'));
  });

  it('expanding the chain reveals the thread level', () => {
    const v = visibleGraph(m, new Set(['k2', 'k2/c3']));
    expect(ids(v.nodes)).toContain('k2/c3/b3');
    expect(pairs(v.links)).toContain('k2/c3/b3->k2/c3/b4');
    // a chain expanded under a collapsed op stays hidden
    expect(ids(visibleGraph(m, new Set(['k2/c3'])).nodes)).toEqual(['k0', 'k1', 'k2', 'out2']);
  });

  it('a graph output fed by a saver inside a collapsed op comes from the op', () => {
    expect(representative('k2/b6', new Set())).toBe('k2');
    expect(representative('k2/c3/b3', new Set(['k2']))).toBe('k2/c3');
    expect(representative('k2/c3/b3', new Set(['k2', 'k2/c3']))).toBe('k2/c3/b3');
    expect(ancestors('k2/c3/b3')).toEqual(['k2', 'k2/c3']);
  });
});

describe('buildModel (GQA flash decoding, two customized ops)', () => {
  const m = buildModel(gqa());

  it('routes both outputs of the first op to the second', () => {
    const v = visibleGraph(m, new Set());
    expect(pairs(v.links)).toEqual(['k0->k3', 'k1->k3', 'k2->k3', 'k3->k4', 'k3->k4', 'k4->out5']);
    expect(v.links.filter(l => l.source === 'k3').map(l => l.label).sort()).toEqual(['2×256×1024 f16', '2×256×512 f16']);
  });

  it('expanding only the second op ends the links at its loaders', () => {
    const v = visibleGraph(m, new Set(['k4']));
    expect(pairs(v.links.filter(l => l.source === 'k3'))).toEqual(['k3->k4/b0', 'k3->k4/b1']);
  });

  it('expanding both joins saver to loader across ops', () => {
    const v = visibleGraph(m, new Set(['k3', 'k4']));
    expect(pairs(v.links.filter(l => l.target.startsWith('k4/b') && l.source.startsWith('k3/')))).toEqual([
      'k3/b8->k4/b0',
      'k3/b9->k4/b1'
    ]);
  });

  it('lists every container and expands them all', () => {
    expect(containerIds(m).sort()).toEqual(['k3', 'k3/c3', 'k3/c6', 'k4']);
    const all = visibleGraph(m, new Set(containerIds(m)));
    expect(all.nodes.filter(n => n.level === 'thread').map(n => n.id).sort()).toEqual([
      'k3/c3/b3',
      'k3/c3/b4',
      'k3/c6/b6',
      'k3/c6/b7'
    ]);
    // every link end is a visible node
    const visible = new Set(all.nodes.map(n => n.id));
    for (const l of all.links) {
      expect(visible.has(l.source) && visible.has(l.target)).toBe(true);
    }
  });
});

describe('expand state helpers', () => {
  it('toggle keeps inner states; reveal opens every ancestor', () => {
    let s = toggleExpanded(new Set(['k2', 'k2/c3']), 'k2');
    expect([...s]).toEqual(['k2/c3']);
    s = toggleExpanded(s, 'k2');
    expect([...s].sort()).toEqual(['k2', 'k2/c3']);
    expect([...reveal(new Set(), ['k3/c6/b7', 'k0'])].sort()).toEqual(['k3', 'k3/c6']);
  });

  it('a block graph without thread_graph shows each op alone', () => {
    const d = rmsRaw();
    delete d.kernel_graph.ops[2].block_graph.thread_graph;
    const g = parseMuGraph(d);
    expect(fusionChains(g.kernel_graph.ops[2].block_graph!)).toEqual([[0], [1], [2], [3], [4], [5], [6]]);
    expect(containerIds(buildModel(g))).toEqual(['k2']);
  });

  it('reads metrics into the kernel op panel', () => {
    const d = rmsRaw();
    d.metrics = { op2: { latency_us: 12.1, bytes: 33816576 } };
    const m = buildModel(parseMuGraph(d));
    expect(m.nodes.get('k2')!.sections.find(s => s.title === 'Metrics')!.rows).toEqual([
      ['bytes', '33816576'],
      ['latency_us', '12.1']
    ]);
  });
});
