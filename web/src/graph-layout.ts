/**
 * Lays out a template's step graph with dagre (left to right: the start pseudo-node, the
 * condition labels, then the steps), ready to draw as SVG. Pure apart from text measuring.
 */
import dagre from '@dagrejs/dagre';
import type { StepGraph } from './types.js';

/** Measures the width of `text` in pixels at the given font size, in the sans or the monospace font. */
export type MeasureText = (text: string, fontSize: number, font: 'sans' | 'mono') => number;

/** A node placed by the layout; x and y are its top-left corner. */
export interface PlacedNode {
  id: string;
  kind: 'start' | 'step';
  label: string;
  /** `search → think|reflect → summarize`, or empty. */
  sequenceText: string;
  description: string | null;
  isDefault: boolean;
  /** True when no edge leads to the step: it can never become active. */
  unreachable: boolean;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** An edge placed by the layout. */
export interface PlacedEdge {
  key: string;
  from: string;
  to: string;
  kind: 'default' | 'condition';
  /** The full condition text (the drawn label may be cut). */
  label: string;
  shortLabel: string;
  path: string;
  labelX: number;
  labelY: number;
}

/** The whole drawing. */
export interface GraphLayout {
  width: number;
  height: number;
  nodes: PlacedNode[];
  edges: PlacedEdge[];
}

/** Font sizes, in pixels, of step names, sequence lines and edge labels. */
export const NODE_FONT = 13;
export const DETAIL_FONT = 11;
export const EDGE_FONT = 11;
const MAX_EDGE_LABEL = 34;
const PADDING_X = 14;

function shorten(text: string, length: number): string {
  const chars = [...text];
  return chars.length <= length ? text : `${chars.slice(0, length - 1).join('')}…`;
}

/** `search → think|reflect`. */
export function sequenceText(sequence: readonly (readonly string[])[]): string {
  return sequence.map((alternatives) => alternatives.join('|')).join(' → ');
}

/** A smooth path through dagre's edge points (quadratic curves through the midpoints). */
function curve(points: readonly { x: number; y: number }[]): string {
  const [first, ...rest] = points;
  if (!first) return '';
  if (rest.length === 0) return `M${first.x},${first.y}`;
  let d = `M${first.x},${first.y}`;
  for (let i = 0; i < rest.length - 1; i++) {
    const p = rest[i]!;
    const next = rest[i + 1]!;
    d += ` Q${p.x},${p.y} ${(p.x + next.x) / 2},${(p.y + next.y) / 2}`;
  }
  const last = rest[rest.length - 1]!;
  return `${d} L${last.x},${last.y}`;
}

/**
 * Positions every node and edge of `graph`. `compact` leaves the condition labels out of the
 * layout (they stay in each edge's tooltip), for narrow screens where they would not fit.
 */
export function layoutGraph(graph: StepGraph, measure: MeasureText, compact = false): GraphLayout {
  // A multigraph: the default step may have both a condition edge and the default edge.
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'LR', nodesep: 10, ranksep: 36, edgesep: 8, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  const targets = new Set(graph.edges.map((edge) => edge.to));

  for (const node of graph.nodes) {
    const seq = sequenceText(node.sequence);
    const title = node.kind === 'start' ? node.label : `${node.label}${node.isDefault ? ' (default)' : ''}`;
    const width =
      Math.max(measure(title, NODE_FONT, 'sans'), seq ? measure(seq, DETAIL_FONT, 'mono') : 0) + PADDING_X * 2;
    const height = node.kind === 'start' ? 34 : seq ? 46 : 32;
    g.setNode(node.id, { width: Math.ceil(width), height });
  }
  graph.edges.forEach((edge, index) => {
    const shortLabel = shorten(edge.label, MAX_EDGE_LABEL);
    const label = compact ? {} : { width: Math.ceil(measure(shortLabel, EDGE_FONT, 'sans')) + 8, height: 16 };
    g.setEdge(edge.from, edge.to, { ...label, labelpos: 'c' }, String(index));
  });

  dagre.layout(g);

  const nodes: PlacedNode[] = graph.nodes.map((node) => {
    const placed = g.node(node.id);
    const x = (placed.x ?? 0) - placed.width / 2;
    const y = (placed.y ?? 0) - placed.height / 2;
    return {
      id: node.id,
      kind: node.kind,
      label: node.label,
      sequenceText: sequenceText(node.sequence),
      description: node.description,
      isDefault: node.isDefault,
      unreachable: node.kind === 'step' && !targets.has(node.id),
      x,
      y,
      width: placed.width,
      height: placed.height,
    };
  });
  const edges: PlacedEdge[] = graph.edges.map((edge, index) => {
    const placed = g.edge(edge.from, edge.to, String(index));
    return {
      key: String(index),
      from: edge.from,
      to: edge.to,
      kind: edge.kind,
      label: edge.label,
      shortLabel: compact ? '' : shorten(edge.label, MAX_EDGE_LABEL),
      path: curve(placed.points ?? []),
      labelX: placed.x ?? 0,
      labelY: placed.y ?? 0,
    };
  });
  const size = g.graph();
  return { width: Math.ceil(size.width ?? 0), height: Math.ceil(size.height ?? 0), nodes, edges };
}
