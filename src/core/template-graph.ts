/**
 * A template's orchestration as a graph, for `baton graph`, the server and the inspector.
 *
 * Step selection (SPEC section 3) is not a state machine with edges between steps: at every
 * user message and tool use, ANY step whose conditions all hold is chosen (the first in
 * config order), else the current step stays, else the default step. So the graph has one
 * `start` pseudo-node ("any message / tool use") with an edge to every step that has
 * conditions (labelled with them) and a `default` edge to the default step. A step with
 * neither can never become active: it is a node without incoming edges.
 *
 * Pure: no I/O, so the browser bundle can use it too.
 */
import type { AgentTemplate, OrchestrationStep, StepCondition } from './schema.js';

/** One node: the start pseudo-node or a step. */
export interface TemplateGraphNode {
  /** The step's name; the start node's id is `__start__` (with more underscores if a step took that name). */
  id: string;
  kind: 'start' | 'step';
  /** The step's name, or the start node's caption. */
  label: string;
  /** The step's description (for the start node: the orchestration's description), or null. */
  description: string | null;
  /** True for the step used when no step with conditions is chosen. */
  isDefault: boolean;
  /** positions of the step's sequence, each lists alternatives */
  sequence: string[][];
}

/** One edge, always from the start node to a step. */
export interface TemplateGraphEdge {
  from: string;
  to: string;
  /** human text of the condition(s), e.g. `message matches /research|find/i` or `used search`; 'default' for the default step */
  label: string;
  kind: 'default' | 'condition';
}

/** A template's orchestration as nodes and edges. */
export interface TemplateGraph {
  nodes: TemplateGraphNode[];
  edges: TemplateGraphEdge[];
}

/** Options of {@link toMermaid} and {@link toDot}. */
export interface GraphRenderOptions {
  /** Step to highlight (a session's active step); a name that is no step is ignored. */
  activeStep?: string | undefined;
  /** Layout direction: left to right (default) or top down. */
  direction?: 'LR' | 'TD';
}

const START_ID = '__start__';
const START_LABEL = 'any message / tool use';
/** Rendered edge labels longer than this are cut (the graph data keeps the full text). */
const MAX_RENDERED_LABEL = 80;

/** The orchestration of `template` as a graph (see the module comment for its shape). */
export function templateGraph(template: AgentTemplate): TemplateGraph {
  const orchestration = template.orchestration;
  const steps = orchestration?.steps ?? [];
  const names = new Set(steps.map((s) => s.name));
  let startId = START_ID;
  // A step may legitimately be called "__start__"; ids must stay unique.
  while (names.has(startId)) startId = `_${startId}_`;
  const description = orchestration?.description;
  const nodes: TemplateGraphNode[] = [
    {
      id: startId,
      kind: 'start',
      label: START_LABEL,
      description: description === undefined ? null : Array.isArray(description) ? description.join(' ') : description,
      isDefault: false,
      sequence: [],
    },
  ];
  const edges: TemplateGraphEdge[] = [];
  const defaultName = orchestration?.defaultStep ?? steps.find((s) => s.isDefault === true)?.name;
  for (const step of steps) {
    const isDefault = step.name === defaultName;
    nodes.push({
      id: step.name,
      kind: 'step',
      label: step.name,
      description: step.description ?? null,
      isDefault,
      sequence: (step.sequence ?? []).map((p) => (typeof p === 'string' ? [p] : [...p])),
    });
    const conditions = step.conditions ?? [];
    if (conditions.length > 0) {
      edges.push({
        from: startId,
        to: step.name,
        label: conditions.map((c) => describeCondition(c, step)).join(' and '),
        kind: 'condition',
      });
    }
    if (isDefault) edges.push({ from: startId, to: step.name, label: 'default', kind: 'default' });
  }
  return { nodes, edges };
}

/** One condition in words, e.g. `used search`, `message matches /find/i`; its `description` wins. */
function describeCondition(condition: StepCondition, step: OrchestrationStep): string {
  if (condition.description !== undefined && condition.description.trim() !== '') return condition.description;
  const value = condition.value ?? '';
  switch (condition.type) {
    case 'tool_used':
      return `used ${value}`;
    case 'sequence_match':
      return `last tools were ${sequenceText((step.sequence ?? []).map((p) => (typeof p === 'string' ? [p] : p)))}`;
    case 'message_contains':
      return `message contains ${JSON.stringify(value)}`;
    case 'message_regex':
      return `message matches /${value}/${condition.flags ?? 'i'}`;
    case 'not_recently_used':
      return `${value} not used in the last ${condition.window ?? 5} tools`;
    default:
      return condition.value === undefined ? condition.type : `${condition.type}: ${value}`;
  }
}

/** `search → think|reflect → summarize`. */
function sequenceText(sequence: readonly (readonly string[])[]): string {
  return sequence.map((alternatives) => alternatives.join('|')).join(' → ');
}

function shorten(text: string, length = MAX_RENDERED_LABEL): string {
  const chars = [...text];
  return chars.length <= length ? text : `${chars.slice(0, length - 1).join('')}…`;
}

/** The node to highlight, if `activeStep` names a step of the graph. */
function activeNode(graph: TemplateGraph, activeStep: string | undefined): TemplateGraphNode | undefined {
  if (activeStep === undefined) return undefined;
  return graph.nodes.find((n) => n.kind === 'step' && n.id === activeStep);
}

/** Steps no edge leads to: they can never become active. */
function unreachable(graph: TemplateGraph): Set<string> {
  const targets = new Set(graph.edges.map((e) => e.to));
  return new Set(graph.nodes.filter((n) => n.kind === 'step' && !targets.has(n.id)).map((n) => n.id));
}

// ---------------------------------------------------------------------------------------
// Mermaid

/**
 * Text for a quoted Mermaid label. Mermaid turns `#name;` / `#123;` entity codes back into
 * characters after parsing, so every ASCII character that could end the string, start a
 * comment, open a shape or be read as HTML or markdown is written as a code; other Unicode
 * passes through, except line breaks, which would end the statement.
 */
function mermaidText(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    // U+FB02 starts Mermaid's own entity placeholders, so a name must not contain it raw.
    if (
      /[A-Za-z0-9 _.,:!?'+=@$^~*/-]/.test(char) ||
      (code > 0x7f && code !== 0x2028 && code !== 0x2029 && code !== 0xfb02)
    ) {
      out += char;
    } else if (char === '"') out += '#quot;';
    else if (code < 0x20 || code === 0x2028 || code === 0x2029) out += ' ';
    else out += `#${code};`;
  }
  return out;
}

/** Mermaid `flowchart` source of the template's orchestration; the active step is highlighted. */
export function toMermaid(template: AgentTemplate, options: GraphRenderOptions = {}): string {
  const graph = templateGraph(template);
  // Generated ids: step names may contain anything, ids may not.
  const ids = new Map<string, string>();
  let stepNumber = 0;
  for (const node of graph.nodes) ids.set(node.id, node.kind === 'start' ? 'entry' : `s${stepNumber++}`);
  const lines = [`flowchart ${options.direction ?? 'LR'}`];
  for (const node of graph.nodes) {
    const id = ids.get(node.id)!;
    if (node.kind === 'start') {
      lines.push(`  ${id}(("${mermaidText(node.label)}"))`);
      continue;
    }
    // Each line is escaped on its own, then joined with the one markup Mermaid must see.
    const text = [node.label];
    if (node.sequence.length > 0) text.push(sequenceText(node.sequence));
    if (node.isDefault) text.push('(default)');
    lines.push(`  ${id}["${text.map((t) => mermaidText(t)).join('<br/>')}"]`);
  }
  for (const edge of graph.edges) {
    const arrow = edge.kind === 'default' ? '-.->' : '-->';
    lines.push(`  ${ids.get(edge.from)} ${arrow}|"${mermaidText(shorten(edge.label))}"| ${ids.get(edge.to)}`);
  }
  lines.push('  classDef entry fill:#eceff1,stroke:#607d8b');
  lines.push(`  class ${ids.get(graph.nodes[0]!.id)} entry`);
  const never = [...unreachable(graph)].map((name) => ids.get(name)!);
  if (never.length > 0) {
    lines.push('  classDef unreachable stroke-dasharray:5 5,color:#78909c');
    lines.push(`  class ${never.join(',')} unreachable`);
  }
  const active = activeNode(graph, options.activeStep);
  if (active !== undefined) {
    lines.push('  classDef active fill:#ffd54f,stroke:#f57f17,stroke-width:3px');
    lines.push(`  class ${ids.get(active.id)} active`);
  }
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------
// Graphviz DOT

/**
 * A DOT quoted string. Quotes and backslashes are escaped (so `\N`, `\G` in a name stay
 * literal), and line breaks become `\n` / `\r`, which DOT labels render as breaks. Other
 * control characters (which Graphviz may choke on) become U+FFFD.
 */
function dotString(text: string): string {
  let out = '';
  for (const char of text) {
    if (char === '\\' || char === '"') out += `\\${char}`;
    else if (char === '\n') out += '\\n';
    else if (char === '\r') out += '\\r';
    else if (char !== '\t' && char.charCodeAt(0) < 0x20) out += '\ufffd';
    else out += char;
  }
  return `"${out}"`;
}

/** Graphviz `digraph` source of the template's orchestration; the active step is filled. */
export function toDot(template: AgentTemplate, options: GraphRenderOptions = {}): string {
  const graph = templateGraph(template);
  const never = unreachable(graph);
  const active = activeNode(graph, options.activeStep);
  const lines = [
    `digraph ${dotString(template.id)} {`,
    `  rankdir=${options.direction === 'TD' ? 'TB' : 'LR'};`,
    '  node [shape=box, style=rounded, fontname="Helvetica"];',
    '  edge [fontname="Helvetica", fontsize=10];',
  ];
  for (const node of graph.nodes) {
    if (node.kind === 'start') {
      lines.push(
        `  ${dotString(node.id)} [label=${dotString(node.label)}, shape=ellipse, style=filled, fillcolor="#eceff1"];`,
      );
      continue;
    }
    const label = [node.label];
    if (node.sequence.length > 0) label.push(sequenceText(node.sequence));
    if (node.isDefault) label.push('(default)');
    const attributes = [`label=${dotString(label.join('\n'))}`];
    if (node === active) attributes.push('style="rounded,filled,bold"', 'fillcolor="#ffd54f"', 'penwidth=3');
    else if (never.has(node.id)) attributes.push('style="rounded,dashed"', 'fontcolor="#78909c"');
    lines.push(`  ${dotString(node.id)} [${attributes.join(', ')}];`);
  }
  for (const edge of graph.edges) {
    const attributes = [`label=${dotString(shorten(edge.label))}`];
    if (edge.kind === 'default') attributes.push('style=dashed');
    lines.push(`  ${dotString(edge.from)} -> ${dotString(edge.to)} [${attributes.join(', ')}];`);
  }
  lines.push('}');
  return `${lines.join('\n')}\n`;
}
