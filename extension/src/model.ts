/**
 * μGraph JSON → a graph model of nodes and links at all three levels, and the
 * visible graph for a given expand/collapse state.
 *
 * Node ids are paths, so ancestry is plain string structure:
 *   `k2`            kernel op 2 (a customized op is a container)
 *   `k2/b3`         block op 3 of kernel op 2
 *   `k2/c1`         fusion chain 1 of kernel op 2 (only chains of 2+ ops; a container)
 *   `k2/c1/b3`      block op 3 at the thread level, inside chain 1
 *   `out5`          kernel graph output tensor 5
 * Links always join the innermost ops (a kernel tensor entering a customized op
 * ends at that op's loader); `visibleGraph` re-targets each end to its nearest
 * visible ancestor, so collapsing a container never loses a dependency.
 */
import { fmtDims, fmtFmap, fmtMap, fmtTensor, fmtValue } from './format';
import type { BlockGraphJSON, MuGraphJSON, OpJSON, TensorJSON } from './mugraph';

export type NodeKind = 'input' | 'output' | 'op' | 'customized' | 'loader' | 'saver' | 'accumulator' | 'chain';
export type Level = 'kernel' | 'block' | 'thread';

export interface DetailSection {
  title: string;
  rows: [string, string][];
}

export interface GraphNode {
  id: string;
  parent: string | null;
  kind: NodeKind;
  level: Level;
  /** 1–3 short lines drawn in the node box; the first is the op name. */
  lines: string[];
  /** Title line of a container when it is expanded. */
  header: string;
  container: boolean;
  /** Key into the JSON's `metrics` (kernel ops: `op<id>`). */
  metricKey: string | null;
  /** Lower-case text that the search box matches against. */
  searchText: string;
  sections: DetailSection[];
}

export interface GraphLink {
  id: string;
  source: string;
  target: string;
  /** Identifies the tensor, so two links carrying it to one collapsed node merge. */
  tensor: string;
  label: string;
}

export interface GraphModel {
  /** Every node of every level, parents before children. */
  nodes: Map<string, GraphNode>;
  links: GraphLink[];
  metrics: MuGraphJSON['metrics'];
}

export interface VisibleGraph {
  nodes: GraphNode[];
  links: GraphLink[];
}

function tensorRow(t: TensorJSON | undefined, id: number, block: boolean): string {
  if (!t) {
    return `t${id} (missing)`;
  }
  const phase = block ? (t.after_accum ? ' · after accum' : ' · in loop') : '';
  return `t${t.id}: ${fmtDims(t.dims)} ${t.dtype}${phase}`;
}

function ioSections(op: OpJSON, tensors: Map<number, TensorJSON>, block: boolean): DetailSection[] {
  const out: DetailSection[] = [];
  if (op.inputs.length) {
    out.push({ title: 'Inputs', rows: op.inputs.map((t, i) => [`#${i}`, tensorRow(tensors.get(t), t, block)]) });
  }
  if (op.outputs.length) {
    out.push({ title: 'Outputs', rows: op.outputs.map((t, i) => [`#${i}`, tensorRow(tensors.get(t), t, block)]) });
  }
  return out;
}

function attrSection(attrs: Record<string, unknown>): DetailSection[] {
  const rows = Object.keys(attrs)
    .sort()
    .map((k): [string, string] => [k, fmtValue(attrs[k])]);
  return rows.length ? [{ title: 'Attributes', rows }] : [];
}

function metricSection(metrics: MuGraphJSON['metrics'], key: string): DetailSection[] {
  const m = metrics?.[key];
  if (!m) {
    return [];
  }
  const rows = Object.keys(m)
    .sort()
    .map((k): [string, string] => [k, fmtValue(m[k])]);
  return rows.length ? [{ title: 'Metrics', rows }] : [];
}

function search(...parts: unknown[]): string {
  return parts
    .map(p => (typeof p === 'string' ? p : JSON.stringify(p)))
    .join(' ')
    .toLowerCase();
}

function attrSearch(attrs: Record<string, unknown>): string {
  return Object.keys(attrs)
    .map(k => `${k}=${fmtValue(attrs[k])}`)
    .join(' ');
}

function accName(acc: unknown): string {
  return acc === null || acc === undefined ? 'none (plain sum)' : String(acc);
}

function chainText(bg: BlockGraphJSON, chain: number[]): string {
  const byId = new Map(bg.ops.map(o => [o.id, o]));
  return chain
    .map(id => {
      const o = byId.get(id);
      if (!o) {
        return `?${id}`;
      }
      return o.type === 'forloop_accum' ? `accum(${o.attrs.acc ?? 'none'})` : o.type;
    })
    .join(' → ');
}

/** The chains of a block graph; every op lands in exactly one (missing ones as singletons). */
export function fusionChains(bg: BlockGraphJSON): number[][] {
  const chains = (bg.thread_graph?.chains ?? []).map(c => [...c]);
  const placed = new Set(chains.flat());
  for (const o of bg.ops) {
    if (!placed.has(o.id)) {
      chains.push([o.id]);
    }
  }
  return chains;
}

/** Builds the full model (all levels). Input must come from `parseMuGraph`. */
export function buildModel(g: MuGraphJSON): GraphModel {
  const kg = g.kernel_graph;
  const nodes = new Map<string, GraphNode>();
  const links: GraphLink[] = [];
  const ktensors = new Map(kg.tensors.map(t => [t.id, t]));
  const add = (n: GraphNode) => nodes.set(n.id, n);

  // Where each kernel tensor comes from, as the innermost node id producing it.
  const producer = new Map<number, string>();
  const loaderIds = new Map<number, string[]>(); // customized op id → loader node ids in input order

  for (const op of kg.ops) {
    const id = `k${op.id}`;
    const metricKey = `op${op.id}`;
    const outT = op.outputs.map(t => ktensors.get(t)).filter((t): t is TensorJSON => !!t);
    const shapes = outT.map(fmtTensor).join(', ');
    if (op.type === 'customized' && op.block_graph) {
      const bg = op.block_graph;
      const grid = fmtDims(bg.grid_dim);
      add({
        id,
        parent: null,
        kind: 'customized',
        level: 'kernel',
        lines: [`customized #${op.id}`, `grid ${grid} · loop ×${bg.forloop_range}`, shapes],
        header: `customized #${op.id} · grid ${grid} · block ${fmtDims(bg.block_dim)} · loop ×${bg.forloop_range}`,
        container: true,
        metricKey,
        searchText: search(id, metricKey, 'customized', `grid ${grid}`, shapes, attrSearch(op.attrs)),
        sections: [
          {
            title: 'Kernel op',
            rows: [
              ['type', 'customized'],
              ['id', String(op.id)]
            ]
          },
          {
            title: 'Launch',
            rows: [
              ['grid_dim', fmtValue(bg.grid_dim)],
              ['block_dim', fmtValue(bg.block_dim)],
              ['blocks', String(bg.grid_dim.reduce((a, b) => a * b, 1))],
              ['forloop_range', String(bg.forloop_range)],
              ['reduction_dimx', String(bg.reduction_dimx)]
            ]
          },
          {
            title: 'Fusion chains (thread graph)',
            rows: fusionChains(bg).map((c, i): [string, string] => [`chain ${i}`, chainText(bg, c)])
          },
          ...ioSections(op, ktensors, false),
          ...attrSection(op.attrs),
          ...metricSection(g.metrics, metricKey)
        ]
      });
      const savers = addBlockGraph(op, bg, id, ktensors, add, links);
      loaderIds.set(op.id, savers.loaders);
      op.outputs.forEach((t, j) => producer.set(t, savers.savers[j] ?? id));
      continue;
    }
    if (op.type === 'input') {
      const t = outT[0];
      const n = kg.inputs.indexOf(op.outputs[0]);
      add({
        id,
        parent: null,
        kind: 'input',
        level: 'kernel',
        lines: [n >= 0 ? `input ${n}` : 'input', shapes],
        header: '',
        container: false,
        metricKey,
        searchText: search(id, metricKey, 'input', shapes, t ? fmtDims(t.dims) : '', t?.dtype ?? '', attrSearch(op.attrs)),
        sections: [
          {
            title: 'Kernel input',
            rows: [
              ['position', n >= 0 ? String(n) : '(not a graph input)'],
              ['op id', String(op.id)]
            ]
          },
          ...ioSections(op, ktensors, false),
          ...attrSection(op.attrs),
          ...metricSection(g.metrics, metricKey)
        ]
      });
    } else {
      add({
        id,
        parent: null,
        kind: 'op',
        level: 'kernel',
        lines: [op.type, shapes],
        header: '',
        container: false,
        metricKey,
        searchText: search(id, metricKey, op.type, shapes, attrSearch(op.attrs)),
        sections: [
          {
            title: 'Kernel op',
            rows: [
              ['type', op.type],
              ['id', String(op.id)]
            ]
          },
          ...ioSections(op, ktensors, false),
          ...attrSection(op.attrs),
          ...metricSection(g.metrics, metricKey)
        ]
      });
    }
    op.outputs.forEach(t => producer.set(t, id));
  }

  // Kernel-level links: producer (or saver) → consumer (or loader).
  for (const op of kg.ops) {
    op.inputs.forEach((t, i) => {
      const src = producer.get(t);
      const dst = loaderIds.get(op.id)?.[i] ?? `k${op.id}`;
      const tensor = ktensors.get(t);
      if (src) {
        links.push({ id: `${src}->${dst}#t${t}`, source: src, target: dst, tensor: `t${t}`, label: tensor ? fmtTensor(tensor) : '' });
      }
    });
  }
  kg.outputs.forEach((t, j) => {
    const tensor = ktensors.get(t);
    const id = `out${t}`;
    const shape = tensor ? fmtTensor(tensor) : '';
    add({
      id,
      parent: null,
      kind: 'output',
      level: 'kernel',
      lines: [`output ${j}`, shape],
      header: '',
      container: false,
      metricKey: null,
      searchText: search(id, 'output', shape, tensor ? fmtDims(tensor.dims) : '', tensor?.dtype ?? ''),
      sections: [
        {
          title: 'Kernel output',
          rows: [
            ['position', String(j)],
            ['tensor', tensorRow(tensor, t, false)]
          ]
        }
      ]
    });
    const src = producer.get(t);
    if (src) {
      links.push({ id: `${src}->${id}#t${t}`, source: src, target: id, tensor: `t${t}`, label: shape });
    }
  });
  return { nodes, links, metrics: g.metrics };
}

/** Adds one customized op's block ops, chains and block-level links; returns loader/saver ids in order. */
function addBlockGraph(
  op: OpJSON,
  bg: BlockGraphJSON,
  kid: string,
  ktensors: Map<number, TensorJSON>,
  add: (n: GraphNode) => void,
  links: GraphLink[]
): { loaders: string[]; savers: string[] } {
  const stensors = new Map(bg.tensors.map(t => [t.id, t]));
  const nodeOf = new Map<number, string>(); // block op id → node id
  const loaders: string[] = [];
  const savers: string[] = [];
  fusionChains(bg).forEach((chain, ci) => {
    if (chain.length < 2) {
      nodeOf.set(chain[0], `${kid}/b${chain[0]}`);
      return;
    }
    // Named by the chain's lead op, so the id reads as "the chain that op 3 leads".
    const cid = `${kid}/c${chain[0]}`;
    const text = chainText(bg, chain);
    const last = bg.ops.find(o => o.id === chain[chain.length - 1]);
    const outT = last?.outputs.map(t => stensors.get(t)).filter((t): t is TensorJSON => !!t) ?? [];
    add({
      id: cid,
      parent: kid,
      kind: 'chain',
      level: 'block',
      lines: [`fused: ${text}`, `${chain.length} ops in registers`, outT.map(fmtTensor).join(', ')],
      header: `thread graph: ${text}`,
      container: true,
      metricKey: null,
      searchText: search(cid, 'chain fused thread', text),
      sections: [
        {
          title: 'Fusion chain (thread graph)',
          rows: [
            ['chain', String(ci)],
            ['lead', chainText(bg, chain.slice(0, 1))],
            ['epilogue', chain.length > 1 ? chainText(bg, chain.slice(1)) : '(none)'],
            ['ops', chain.join(', ')],
            ['result', outT.map(t => tensorRow(t, t.id, true)).join('; ') || '(none)']
          ]
        }
      ]
    });
    for (const id of chain) {
      nodeOf.set(id, `${cid}/b${id}`);
    }
  });

  let nLoad = 0;
  let nSave = 0;
  for (const b of bg.ops) {
    const id = nodeOf.get(b.id) ?? `${kid}/b${b.id}`;
    const parent = id.slice(0, id.lastIndexOf('/'));
    const level: Level = parent === kid ? 'block' : 'thread';
    const outT = b.outputs.map(t => stensors.get(t)).filter((t): t is TensorJSON => !!t);
    const shapes = outT.map(fmtTensor).join(', ');
    const common = { id, parent, level, header: '', container: false, metricKey: null };
    const io = ioSections(b, stensors, true);
    const base: [string, string][] = [
      ['type', b.type],
      ['block op id', String(b.id)],
      ['in kernel op', kid.slice(1)],
      ['level', level]
    ];
    if (b.type === 'input') {
      const i = nLoad++;
      const kt = ktensors.get(op.inputs[i]);
      loaders.push(id);
      const imap = fmtMap(b.attrs.input_map);
      const fmap = fmtFmap(b.attrs.forloop_dim);
      add({
        ...common,
        kind: 'loader',
        lines: [`loader ${i}`, `imap ${imap} fmap ${fmap}`, shapes],
        searchText: search(id, 'loader input', `imap ${imap}`, `fmap ${fmap}`, shapes, attrSearch(b.attrs)),
        sections: [
          { title: 'Block op', rows: base },
          {
            title: 'Loader',
            rows: [
              ['imap', `${fmtValue(b.attrs.input_map)}  ${imap}`],
              [
                'fmap (forloop_dim)',
                fmap === '∅' ? `${fmtValue(b.attrs.forloop_dim)} (none: the same tile every iteration)` : fmap
              ],
              ['kernel tensor', tensorRow(kt, op.inputs[i], false)],
              ['dtensor_dims', fmtValue(b.attrs.dtensor_dims)],
              ['tile', outT.map(fmtTensor).join(', ')],
              ['store_in_dmem', fmtValue(b.attrs.store_in_dmem ?? false)]
            ]
          },
          ...io,
          ...attrSection(b.attrs)
        ]
      });
    } else if (b.type === 'output') {
      const j = nSave++;
      const kt = ktensors.get(op.outputs[j]);
      savers.push(id);
      const omap = fmtMap(b.attrs.output_map);
      const outDims = Array.isArray(b.attrs.out_dims) ? fmtDims(b.attrs.out_dims as number[]) : '';
      add({
        ...common,
        kind: 'saver',
        lines: [`saver ${j}`, `omap ${omap}`, outDims ? `→ ${outDims}` : ''],
        searchText: search(id, 'saver output', `omap ${omap}`, outDims, attrSearch(b.attrs)),
        sections: [
          { title: 'Block op', rows: base },
          {
            title: 'Saver',
            rows: [
              ['omap', `${fmtValue(b.attrs.output_map)}  ${omap}`],
              ['out_dims', fmtValue(b.attrs.out_dims)],
              ['kernel tensor', tensorRow(kt, op.outputs[j], false)]
            ]
          },
          ...io,
          ...attrSection(b.attrs)
        ]
      });
    } else if (b.type === 'forloop_accum') {
      const acc = b.attrs.acc;
      const after = outT.map(t => String(t.after_accum === true));
      add({
        ...common,
        kind: 'accumulator',
        lines: [acc === null || acc === undefined ? 'accum' : `accum ${acc}`, shapes],
        searchText: search(id, 'accumulator accum forloop_accum', `acc=${fmtValue(acc)}`, shapes, attrSearch(b.attrs)),
        sections: [
          { title: 'Block op', rows: base },
          {
            title: 'Accumulator',
            rows: [
              ['kind (acc)', accName(acc)],
              ['forloop_range', String(bg.forloop_range)],
              ['after_accum', after.join(', ')]
            ]
          },
          ...io,
          ...attrSection(b.attrs)
        ]
      });
    } else {
      add({
        ...common,
        kind: 'op',
        lines: [b.type, shapes],
        searchText: search(id, b.type, shapes, attrSearch(b.attrs)),
        sections: [{ title: 'Block op', rows: base }, ...io, ...attrSection(b.attrs)]
      });
    }
  }

  const producer = new Map<number, string>();
  for (const b of bg.ops) {
    for (const t of b.outputs) {
      producer.set(t, nodeOf.get(b.id) ?? `${kid}/b${b.id}`);
    }
  }
  for (const b of bg.ops) {
    const dst = nodeOf.get(b.id) ?? `${kid}/b${b.id}`;
    for (const t of b.inputs) {
      const src = producer.get(t);
      const st = stensors.get(t);
      if (src) {
        links.push({ id: `${src}->${dst}#${kid}t${t}`, source: src, target: dst, tensor: `${kid}t${t}`, label: st ? fmtTensor(st) : '' });
      }
    }
  }
  return { loaders, savers };
}

/** Ids of `id`'s ancestors, outermost first (from the path structure of ids). */
export function ancestors(id: string): string[] {
  const parts = id.split('/');
  const out: string[] = [];
  for (let i = 1; i < parts.length; i++) {
    out.push(parts.slice(0, i).join('/'));
  }
  return out;
}

/** The node that stands for `id` under `expanded`: itself, or its outermost collapsed ancestor. */
export function representative(id: string, expanded: ReadonlySet<string>): string {
  for (const a of ancestors(id)) {
    if (!expanded.has(a)) {
      return a;
    }
  }
  return id;
}

export function isVisible(id: string, expanded: ReadonlySet<string>): boolean {
  return representative(id, expanded) === id;
}

/**
 * The containers open at `level`: none for `kernel`, the customized ops for `block`,
 * every container (so fused chains show their thread ops too) for `thread` and `all`.
 */
export function expandedForLevel(model: GraphModel, level: 'kernel' | 'block' | 'thread' | 'all'): Set<string> {
  if (level === 'kernel') {
    return new Set();
  }
  const ids = containerIds(model);
  return new Set(level === 'block' ? ids.filter(id => !id.includes('/')) : ids);
}

export function containerIds(model: GraphModel): string[] {
  return [...model.nodes.values()].filter(n => n.container).map(n => n.id);
}

/** Toggling keeps the inner containers' states, so re-expanding restores the old view. */
export function toggleExpanded(expanded: ReadonlySet<string>, id: string): Set<string> {
  const next = new Set(expanded);
  if (next.has(id)) {
    next.delete(id);
  } else {
    next.add(id);
  }
  return next;
}

/** Expands every ancestor of `ids`, so those nodes become visible. */
export function reveal(expanded: ReadonlySet<string>, ids: Iterable<string>): Set<string> {
  const next = new Set(expanded);
  for (const id of ids) {
    for (const a of ancestors(id)) {
      next.add(a);
    }
  }
  return next;
}

/** Visible nodes (parents first) and links re-targeted to visible ends, merged and de-looped. */
export function visibleGraph(model: GraphModel, expanded: ReadonlySet<string>): VisibleGraph {
  const nodes = [...model.nodes.values()].filter(n => isVisible(n.id, expanded));
  const seen = new Set<string>();
  const links: GraphLink[] = [];
  for (const l of model.links) {
    const source = representative(l.source, expanded);
    const target = representative(l.target, expanded);
    if (source === target) {
      continue; // both ends inside one collapsed container
    }
    const key = `${source}->${target}#${l.tensor}`;
    if (seen.has(key)) {
      continue;
    }
    seen.add(key);
    links.push({ ...l, id: key, source, target });
  }
  return { nodes, links };
}
