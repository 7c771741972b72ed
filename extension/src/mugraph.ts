/**
 * The μGraph JSON (docs/json_format.md, version 1) as TypeScript types, and a
 * validating parser.
 *
 * The renderer shows whatever a notebook saved, possibly written by another
 * version of mirage_lab or edited by hand, so every field is checked here once and
 * a readable MuGraphError names the first bad path. The view code after this
 * point may then trust the shapes it reads.
 */

export const MIME_TYPE = 'application/vnd.mirage-lab.mugraph+json';
export const FORMAT = 'mirage_lab.mugraph';
export const MAX_VERSION = 1;

export type Attrs = Record<string, unknown>;

export interface TensorJSON {
  id: number;
  dims: number[];
  dtype: string;
  /** Block-graph tensors only: computed after the for-loop's accumulation. */
  after_accum?: boolean;
}

export interface OpJSON {
  id: number;
  type: string;
  inputs: number[];
  outputs: number[];
  attrs: Attrs;
  block_graph?: BlockGraphJSON;
}

export interface BlockGraphJSON {
  grid_dim: number[];
  block_dim: number[];
  forloop_range: number;
  reduction_dimx: number;
  tensors: TensorJSON[];
  ops: OpJSON[];
  /** Op ids per fusion chain (derived; absent in hand-written files). */
  thread_graph?: { chains: number[][] };
}

export interface KernelGraphJSON {
  tensors: TensorJSON[];
  inputs: number[];
  outputs: number[];
  ops: OpJSON[];
}

/** Per kernel op ("op<id>") metric name → value; only numbers are used for colour. */
export type Metrics = Record<string, Record<string, unknown>>;

/** How far the inspector opens the graph when it is first drawn. */
export type ExpandLevel = 'kernel' | 'block' | 'thread' | 'all';
export const EXPAND_LEVELS: readonly ExpandLevel[] = ['kernel', 'block', 'thread', 'all'];

/**
 * Viewer-only hints (optional; `mi.inspect` writes them): the metric to colour by, how far
 * to open the graph, a title, and graph-level numbers (e.g. the measured latency).
 */
export interface ViewJSON {
  metric?: string;
  expand?: ExpandLevel;
  title?: string;
  summary?: Record<string, number | string>;
}

export interface MuGraphJSON {
  format: string;
  version: number;
  kernel_graph: KernelGraphJSON;
  metrics?: Metrics;
  view?: ViewJSON;
}

export class MuGraphError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MuGraphError';
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(path: string, what: string): never {
  throw new MuGraphError(`${path}: ${what}`);
}

function int(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    fail(path, `expected an integer, got ${describe(v)}`);
  }
  return v;
}

function intList(v: unknown, path: string): number[] {
  if (!Array.isArray(v)) {
    fail(path, `expected a list of integers, got ${describe(v)}`);
  }
  return v.map((x, i) => int(x, `${path}[${i}]`));
}

function describe(v: unknown): string {
  if (v === undefined) {
    return 'nothing';
  }
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

function parseTensors(v: unknown, path: string, block: boolean): TensorJSON[] {
  if (!Array.isArray(v)) {
    fail(path, `expected a list of tensors, got ${describe(v)}`);
  }
  const seen = new Set<number>();
  return v.map((t, i) => {
    const p = `${path}[${i}]`;
    if (!isObject(t)) {
      fail(p, `expected a tensor object, got ${describe(t)}`);
    }
    const id = int(t.id, `${p}.id`);
    if (seen.has(id)) {
      fail(`${p}.id`, `tensor id ${id} appears twice`);
    }
    seen.add(id);
    if (typeof t.dtype !== 'string') {
      fail(`${p}.dtype`, `expected a dtype name, got ${describe(t.dtype)}`);
    }
    const out: TensorJSON = { id, dims: intList(t.dims, `${p}.dims`), dtype: t.dtype };
    if (block) {
      out.after_accum = t.after_accum === true;
    }
    return out;
  });
}

function parseOps(
  v: unknown,
  path: string,
  tensorIds: Set<number>,
  level: 'kernel' | 'block'
): OpJSON[] {
  if (!Array.isArray(v)) {
    fail(path, `expected a list of ops, got ${describe(v)}`);
  }
  const seen = new Set<number>();
  return v.map((o, i) => {
    const p = `${path}[${i}]`;
    if (!isObject(o)) {
      fail(p, `expected an op object, got ${describe(o)}`);
    }
    const id = int(o.id, `${p}.id`);
    if (seen.has(id)) {
      fail(`${p}.id`, `op id ${id} appears twice`);
    }
    seen.add(id);
    if (typeof o.type !== 'string' || o.type === '') {
      fail(`${p}.type`, `expected an op type name, got ${describe(o.type)}`);
    }
    const inputs = intList(o.inputs, `${p}.inputs`);
    const outputs = intList(o.outputs, `${p}.outputs`);
    for (const [k, list] of [
      ['inputs', inputs],
      ['outputs', outputs]
    ] as const) {
      list.forEach((t, j) => {
        if (!tensorIds.has(t)) {
          fail(`${p}.${k}[${j}]`, `tensor ${t} is not in the ${level} graph's tensors`);
        }
      });
    }
    if (o.attrs !== undefined && !isObject(o.attrs)) {
      fail(`${p}.attrs`, `expected an object, got ${describe(o.attrs)}`);
    }
    const op: OpJSON = { id, type: o.type, inputs, outputs, attrs: (o.attrs as Attrs) ?? {} };
    if (level === 'kernel' && o.type === 'customized') {
      op.block_graph = parseBlockGraph(o.block_graph, `${p}.block_graph`);
      const nIn = op.block_graph.ops.filter(b => b.type === 'input').length;
      const nOut = op.block_graph.ops.filter(b => b.type === 'output').length;
      if (nIn !== inputs.length) {
        fail(`${p}.block_graph`, `has ${nIn} input loaders for the op's ${inputs.length} inputs`);
      }
      if (nOut !== outputs.length) {
        fail(`${p}.block_graph`, `has ${nOut} output savers for the op's ${outputs.length} outputs`);
      }
    }
    return op;
  });
}

function parseBlockGraph(v: unknown, path: string): BlockGraphJSON {
  if (!isObject(v)) {
    fail(path, `a customized op needs a block_graph object, got ${describe(v)}`);
  }
  const tensors = parseTensors(v.tensors, `${path}.tensors`, true);
  const ops = parseOps(v.ops, `${path}.ops`, new Set(tensors.map(t => t.id)), 'block');
  const bg: BlockGraphJSON = {
    grid_dim: intList(v.grid_dim, `${path}.grid_dim`),
    block_dim: intList(v.block_dim, `${path}.block_dim`),
    forloop_range: int(v.forloop_range, `${path}.forloop_range`),
    reduction_dimx: v.reduction_dimx === undefined ? 0 : int(v.reduction_dimx, `${path}.reduction_dimx`),
    tensors,
    ops
  };
  if (v.thread_graph !== undefined) {
    const tg = v.thread_graph;
    if (!isObject(tg) || !Array.isArray(tg.chains)) {
      fail(`${path}.thread_graph`, `expected {"chains": [[op ids]...]}, got ${describe(tg)}`);
    }
    const opIds = new Set(ops.map(o => o.id));
    const placed = new Set<number>();
    const chains = tg.chains.map((c, i) => {
      const chain = intList(c, `${path}.thread_graph.chains[${i}]`);
      if (chain.length === 0) {
        fail(`${path}.thread_graph.chains[${i}]`, 'a fusion chain needs at least one op');
      }
      chain.forEach((id, j) => {
        if (!opIds.has(id)) {
          fail(`${path}.thread_graph.chains[${i}][${j}]`, `op ${id} is not in the block graph`);
        }
        if (placed.has(id)) {
          fail(`${path}.thread_graph.chains[${i}][${j}]`, `op ${id} is in two fusion chains`);
        }
        placed.add(id);
      });
      return chain;
    });
    bg.thread_graph = { chains };
  }
  return bg;
}

/**
 * The checks every mirage_lab bundle shares: JSON (an object, or a string from other front
 * ends), its `format` and a `version` this viewer reads. Throws MuGraphError naming the field.
 */
function envelope(data: unknown, what: string, format: string): Record<string, unknown> {
  let d = data;
  if (typeof d === 'string') {
    try {
      d = JSON.parse(d);
    } catch (e) {
      throw new MuGraphError(`not valid JSON (${(e as Error).message})`);
    }
  }
  if (!isObject(d)) {
    fail(what, `expected a JSON object, got ${describe(d)}`);
  }
  if (d.format !== format) {
    fail('format', `expected "${format}", got ${describe(d.format)}`);
  }
  const version = int(d.version, 'version');
  if (version > MAX_VERSION) {
    fail('version', `this viewer reads versions up to ${MAX_VERSION}, the data is version ${version}; update mirage-lab`);
  }
  return d;
}

/**
 * Checks `data` (the MIME bundle's value: an object, or a JSON string from other
 * front ends) and returns it typed. Throws MuGraphError naming the bad field.
 */
export function parseMuGraph(data: unknown): MuGraphJSON {
  const d = envelope(data, 'μGraph', FORMAT);
  const version = d.version as number; // an int, checked by envelope
  const kg = d.kernel_graph;
  if (!isObject(kg)) {
    fail('kernel_graph', `expected an object, got ${describe(kg)}`);
  }
  const tensors = parseTensors(kg.tensors, 'kernel_graph.tensors', false);
  const ids = new Set(tensors.map(t => t.id));
  const ops = parseOps(kg.ops, 'kernel_graph.ops', ids, 'kernel');
  const inputs = intList(kg.inputs, 'kernel_graph.inputs');
  const outputs = intList(kg.outputs, 'kernel_graph.outputs');
  for (const [k, list] of [
    ['inputs', inputs],
    ['outputs', outputs]
  ] as const) {
    list.forEach((t, j) => {
      if (!ids.has(t)) {
        fail(`kernel_graph.${k}[${j}]`, `tensor ${t} is not in kernel_graph.tensors`);
      }
    });
  }
  const out: MuGraphJSON = {
    format: FORMAT,
    version,
    kernel_graph: { tensors, inputs, outputs, ops }
  };
  if (d.metrics !== undefined && d.metrics !== null) {
    if (!isObject(d.metrics)) {
      fail('metrics', `expected {"op<id>": {name: value}}, got ${describe(d.metrics)}`);
    }
    const metrics: Metrics = {};
    for (const [key, vals] of Object.entries(d.metrics)) {
      if (!isObject(vals)) {
        fail(`metrics.${key}`, `expected {name: value}, got ${describe(vals)}`);
      }
      metrics[key] = vals;
    }
    out.metrics = metrics;
  }
  if (d.view !== undefined && d.view !== null) {
    out.view = parseView(d.view, 'view');
  }
  return out;
}

/** Checks the optional viewer hints; a bad hint is an error like any other bad field. */
export function parseView(v: unknown, path: string): ViewJSON {
  if (!isObject(v)) {
    fail(path, `expected {metric, expand, title, summary}, got ${describe(v)}`);
  }
  const out: ViewJSON = {};
  for (const key of ['metric', 'title'] as const) {
    if (v[key] !== undefined) {
      if (typeof v[key] !== 'string') {
        fail(`${path}.${key}`, `expected a string, got ${describe(v[key])}`);
      }
      out[key] = v[key] as string;
    }
  }
  if (v.expand !== undefined) {
    if (!EXPAND_LEVELS.includes(v.expand as ExpandLevel)) {
      fail(`${path}.expand`, `expected one of ${EXPAND_LEVELS.join(', ')}, got ${describe(v.expand)}`);
    }
    out.expand = v.expand as ExpandLevel;
  }
  if (v.summary !== undefined) {
    if (!isObject(v.summary)) {
      fail(`${path}.summary`, `expected {name: number or text}, got ${describe(v.summary)}`);
    }
    const summary: Record<string, number | string> = {};
    for (const [k, x] of Object.entries(v.summary)) {
      if (typeof x !== 'string' && !(typeof x === 'number' && Number.isFinite(x))) {
        fail(`${path}.summary.${k}`, `expected a number or text, got ${describe(x)}`);
      }
      summary[k] = x as number | string;
    }
    out.summary = summary;
  }
  return out;
}

export const COMPARE_MIME_TYPE = 'application/vnd.mirage-lab.mugraph-compare+json';
export const COMPARE_FORMAT = 'mirage_lab.mugraph-compare';

export interface CompareJSON {
  format: string;
  version: number;
  candidates: { label: string; graph: MuGraphJSON }[];
}

/** The compare bundle: two or more labelled μGraphs (each with its metrics and summary). */
export function parseCompare(data: unknown): CompareJSON {
  const d = envelope(data, 'comparison', COMPARE_FORMAT);
  const version = d.version as number; // an int, checked by envelope
  if (!Array.isArray(d.candidates) || d.candidates.length < 2) {
    fail('candidates', `expected a list of at least two candidates, got ${describe(d.candidates)}`);
  }
  const candidates = d.candidates.map((c, i) => {
    const p = `candidates[${i}]`;
    if (!isObject(c)) {
      fail(p, `expected {label, graph}, got ${describe(c)}`);
    }
    if (typeof c.label !== 'string') {
      fail(`${p}.label`, `expected a string, got ${describe(c.label)}`);
    }
    try {
      return { label: c.label, graph: parseMuGraph(c.graph) };
    } catch (e) {
      throw new MuGraphError(`${p}.graph.${(e as Error).message}`);
    }
  });
  return { format: COMPARE_FORMAT, version, candidates };
}
