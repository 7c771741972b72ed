/**
 * Visible graph → ELK's JSON graph → positioned boxes and polylines.
 *
 * ELK is passed in (`ElkLike`) rather than imported, so the unit tests run the
 * real layered algorithm in node while the widget loads the 1.6 MB bundle lazily,
 * only when a μGraph is first shown. Expanded containers are ELK compound nodes;
 * `INCLUDE_CHILDREN` lays the whole hierarchy out at once, so an edge from a kernel
 * input to a loader deep inside a customized op is routed like any other. Both
 * coordinate options are ROOT, so every returned position is absolute.
 */
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api';
import type { GraphLink, GraphNode, VisibleGraph } from './model';

export interface ElkLike {
  layout(graph: ElkNode): Promise<ElkNode>;
}

// Monospace metrics (11px node text, 10px edge labels): the renderer uses a
// monospace font so these estimates match what is drawn, without a DOM to measure.
export const NODE_FONT_PX = 11;
export const LABEL_FONT_PX = 10;
export const CHAR_W = 0.62; // em per character, a little above DejaVu Sans Mono's 0.602
export const LINE_H = 15;
export const PAD_X = 10;
export const PAD_Y = 7;
export const TOGGLE_W = 18; // room for the +/− button of a container
export const HEADER_H = 26; // title strip of an expanded container
const MIN_W = 96;

export function textWidth(text: string, px: number): number {
  return Math.ceil([...text].length * px * CHAR_W);
}

/** Box size of a collapsed node (or any leaf). */
export function nodeSize(n: GraphNode): { width: number; height: number } {
  const lines = n.lines.filter(Boolean);
  const w = Math.max(...lines.map(l => textWidth(l, NODE_FONT_PX)), 0);
  return {
    width: Math.max(MIN_W, w + 2 * PAD_X + (n.container ? TOGGLE_W : 0)),
    height: lines.length * LINE_H + 2 * PAD_Y
  };
}

export interface LaidNode {
  id: string;
  node: GraphNode;
  /** True for an expanded container drawn as a frame around its children. */
  expanded: boolean;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface LaidEdge {
  id: string;
  link: GraphLink;
  points: { x: number; y: number }[];
  label: { text: string; x: number; y: number; width: number; height: number } | null;
}

export interface Layout {
  nodes: LaidNode[];
  edges: LaidEdge[];
  width: number;
  height: number;
}

export interface LayoutOptions {
  /** Draw tensor shapes on edges (off makes large graphs denser). */
  edgeLabels?: boolean;
}

/** The ELK input graph for `view` (pure; exported for tests). */
export function toElkGraph(view: VisibleGraph, expanded: ReadonlySet<string>, opts: LayoutOptions = {}): ElkNode {
  const edgeLabels = opts.edgeLabels ?? true;
  const root: ElkNode = {
    id: '__root__',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'DOWN',
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.json.edgeCoords': 'ROOT',
      'elk.json.shapeCoords': 'ROOT',
      'elk.edgeRouting': 'ORTHOGONAL',
      'elk.spacing.nodeNode': '28',
      'elk.layered.spacing.nodeNodeBetweenLayers': '34',
      'elk.spacing.edgeLabel': '4',
      'elk.edgeLabels.placement': 'CENTER',
      'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
      'elk.padding': '[top=16,left=16,bottom=16,right=16]'
    },
    children: [],
    edges: []
  };
  const byId = new Map<string, ElkNode>();
  for (const n of view.nodes) {
    const open = n.container && expanded.has(n.id);
    const size = nodeSize(n);
    const elkNode: ElkNode = open
      ? {
          id: n.id,
          children: [],
          layoutOptions: {
            'elk.padding': `[top=${HEADER_H + 10},left=12,bottom=12,right=12]`,
            'elk.nodeSize.constraints': 'MINIMUM_SIZE',
            // (height, width), not (width, height): layered ELK lays a DOWN graph out
            // as RIGHT and transposes, but not a compound node's minimum size (ELK
            // 0.12). The layout tests check the container really fits its header.
            'elk.nodeSize.minimum': `(${HEADER_H + 20}, ${textWidth(n.header, NODE_FONT_PX) + 2 * PAD_X + TOGGLE_W})`
          }
        }
      : { id: n.id, width: size.width, height: size.height };
    byId.set(n.id, elkNode);
    const parent = n.parent ? byId.get(n.parent) : root;
    // Parents come first in view.nodes; a missing parent means a bad view, so attach to the root.
    (parent ?? root).children!.push(elkNode);
  }
  root.edges = view.links
    .filter(l => byId.has(l.source) && byId.has(l.target))
    .map(
      (l): ElkExtendedEdge => ({
        id: l.id,
        sources: [l.source],
        targets: [l.target],
        labels:
          edgeLabels && l.label
            ? [{ text: l.label, width: textWidth(l.label, LABEL_FONT_PX) + 4, height: LABEL_FONT_PX + 4 }]
            : []
      })
    );
  return root;
}

/** Runs ELK on `view` and returns absolute boxes (parents before children) and edge polylines. */
export async function layoutGraph(
  elk: ElkLike,
  view: VisibleGraph,
  expanded: ReadonlySet<string>,
  opts: LayoutOptions = {}
): Promise<Layout> {
  const result = await elk.layout(toElkGraph(view, expanded, opts));
  const nodeById = new Map(view.nodes.map(n => [n.id, n]));
  const nodes: LaidNode[] = [];
  const walk = (e: ElkNode) => {
    for (const c of e.children ?? []) {
      const n = nodeById.get(c.id);
      if (n) {
        nodes.push({
          id: c.id,
          node: n,
          expanded: n.container && expanded.has(n.id),
          x: c.x ?? 0,
          y: c.y ?? 0,
          width: c.width ?? 0,
          height: c.height ?? 0
        });
      }
      walk(c);
    }
  };
  walk(result);
  const linkById = new Map(view.links.map(l => [l.id, l]));
  const edges: LaidEdge[] = [];
  for (const e of (result.edges ?? []) as ElkExtendedEdge[]) {
    const link = linkById.get(e.id);
    if (!link) {
      continue;
    }
    const points: { x: number; y: number }[] = [];
    for (const s of e.sections ?? []) {
      points.push(s.startPoint, ...(s.bendPoints ?? []), s.endPoint);
    }
    const l = e.labels?.[0];
    edges.push({
      id: e.id,
      link,
      points,
      label:
        l && l.text
          ? { text: l.text, x: l.x ?? 0, y: l.y ?? 0, width: l.width ?? 0, height: l.height ?? 0 }
          : null
    });
  }
  return { nodes, edges, width: result.width ?? 0, height: result.height ?? 0 };
}
