import { readdirSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { agentdockSample, agentdockTemplateFiles } from '../../test/helpers/agentdock.js';
import { loadTemplate } from '../templates/load-template.js';
import type { AgentTemplate, OrchestrationStep } from './schema.js';
import { templateGraph, toDot, toMermaid } from './template-graph.js';
import { parseTemplate } from './validate-template.js';

const EXAMPLES = new URL('../../examples/agents/', import.meta.url);
const jsonFiles = (dir: URL) =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => new URL(f, dir).pathname);
const templateFiles = [...jsonFiles(EXAMPLES), ...agentdockTemplateFiles()];

const template = (steps: unknown[], extra: Record<string, unknown> = {}): AgentTemplate =>
  parseTemplate({ id: 't', ...extra, orchestration: { steps, ...((extra.orchestration as object) ?? {}) } });

// ---------------------------------------------------------------------------------------
// A reader of the Mermaid subset toMermaid writes: if it accepts the output, every label is
// one well-formed quoted string and every edge joins declared nodes.

interface MermaidDoc {
  header: string;
  nodes: Map<string, string[]>;
  edges: { from: string; to: string; dashed: boolean; label: string }[];
  classes: Map<string, string[]>;
}

/** Mermaid entity codes back to characters (what Mermaid does after parsing). */
function decodeMermaid(text: string): string {
  return text.replace(/#(\w+);/g, (_, code: string) => {
    if (/^\d+$/.test(code)) return String.fromCodePoint(Number(code));
    if (code === 'quot') return '"';
    throw new Error(`unknown entity #${code};`);
  });
}

/** Apart from entity codes, nothing that could end the string, open a shape or be HTML may stay raw. */
function expectNothingRaw(label: string): void {
  expect(label.replace(/#\w+;/g, '')).not.toMatch(/["[\]{}()<>|`;#&%\n\r]/);
}

function readMermaid(source: string): MermaidDoc {
  const [header, ...lines] = source.trimEnd().split('\n');
  const doc: MermaidDoc = { header: header!, nodes: new Map(), edges: [], classes: new Map() };
  const NODE = /^ {2}(\w+)(?:\["([^"\n]*)"\]|\(\("([^"\n]*)"\)\))$/;
  const EDGE = /^ {2}(\w+) (-->|-\.->)\|"([^"\n]*)"\| (\w+)$/;
  const CLASS_DEF = /^ {2}classDef (\w+) [\w:#,. -]+$/;
  const CLASS = /^ {2}class ([\w,]+) (\w+)$/;
  for (const line of lines) {
    const node = NODE.exec(line);
    const edge = EDGE.exec(line);
    const classDef = CLASS_DEF.exec(line);
    const use = CLASS.exec(line);
    if (node) {
      expect(doc.nodes.has(node[1]!), `node ${node[1]} declared twice`).toBe(false);
      const texts = (node[2] ?? node[3]!).split('<br/>');
      for (const text of texts) expectNothingRaw(text);
      doc.nodes.set(node[1]!, texts.map(decodeMermaid));
    } else if (edge) {
      expectNothingRaw(edge[3]!);
      doc.edges.push({ from: edge[1]!, to: edge[4]!, dashed: edge[2] === '-.->', label: decodeMermaid(edge[3]!) });
    } else if (classDef) {
      doc.classes.set(classDef[1]!, doc.classes.get(classDef[1]!) ?? []);
    } else if (use) {
      expect(doc.classes.has(use[2]!), `class ${use[2]} used before classDef`).toBe(true);
      doc.classes.get(use[2]!)!.push(...use[1]!.split(','));
    } else {
      throw new Error(`unexpected Mermaid line: ${JSON.stringify(line)}`);
    }
  }
  for (const edge of doc.edges) {
    expect(doc.nodes.has(edge.from), `edge from undeclared ${edge.from}`).toBe(true);
    expect(doc.nodes.has(edge.to), `edge to undeclared ${edge.to}`).toBe(true);
  }
  for (const ids of doc.classes.values()) for (const id of ids) expect(doc.nodes.has(id)).toBe(true);
  return doc;
}

// ---------------------------------------------------------------------------------------
// A reader of the DOT subset toDot writes, tokenizing quoted strings as Graphviz does
// (`\"` is a quote, `\\` a pair kept whole), then unescaping labels.

interface DotDoc {
  name: string;
  nodes: Map<string, Map<string, string>>;
  edges: { from: string; to: string; attributes: Map<string, string> }[];
}

function dotTokens(line: string): string[] {
  const tokens: string[] = [];
  let i = 0;
  while (i < line.length) {
    const c = line[i]!;
    if (c === ' ') i++;
    else if (c === '"') {
      let j = i + 1;
      let text = '';
      for (;;) {
        if (j >= line.length) throw new Error(`unterminated string in ${line}`);
        if (line[j] === '\\' && (line[j + 1] === '"' || line[j + 1] === '\\')) {
          text += `\\${line[j + 1]}`;
          j += 2;
        } else if (line[j] === '"') break;
        else text += line[j++];
      }
      tokens.push(`"${text}"`);
      i = j + 1;
    } else if (line.startsWith('->', i)) {
      tokens.push('->');
      i += 2;
    } else if ('[]=,;{}'.includes(c)) {
      tokens.push(c);
      i++;
    } else {
      const m = /^[\w.#]+/.exec(line.slice(i));
      if (!m) throw new Error(`unexpected character ${JSON.stringify(c)} in ${line}`);
      tokens.push(m[0]);
      i += m[0].length;
    }
  }
  return tokens;
}

/** A DOT string's text as a label shows it (`\n` a line break, `\\` one backslash). */
function dotText(token: string): string {
  expect(token.startsWith('"') && token.endsWith('"')).toBe(true);
  return token.slice(1, -1).replace(/\\(["\\nr])/g, (_, c: string) => (c === 'n' ? '\n' : c === 'r' ? '\r' : c));
}

function attributes(tokens: string[]): Map<string, string> {
  const out = new Map<string, string>();
  expect(tokens[0]).toBe('[');
  expect(tokens.at(-2)).toBe(']');
  expect(tokens.at(-1)).toBe(';');
  const inner = tokens.slice(1, -2);
  for (let i = 0; i < inner.length; i += 4) {
    expect(inner[i + 1]).toBe('=');
    if (i + 3 < inner.length) expect(inner[i + 3]).toBe(',');
    out.set(inner[i]!, inner[i + 2]!);
  }
  return out;
}

function readDot(source: string): DotDoc {
  const lines = source.trimEnd().split('\n');
  const head = dotTokens(lines[0]!);
  expect(head[0]).toBe('digraph');
  expect(head[2]).toBe('{');
  expect(lines.at(-1)).toBe('}');
  const doc: DotDoc = { name: dotText(head[1]!), nodes: new Map(), edges: [] };
  for (const line of lines.slice(1, -1)) {
    const tokens = dotTokens(line);
    if (tokens[1] === '=' || ['node', 'edge'].includes(tokens[0]!)) continue; // graph defaults
    if (tokens[1] === '->') {
      doc.edges.push({ from: dotText(tokens[0]!), to: dotText(tokens[2]!), attributes: attributes(tokens.slice(3)) });
    } else {
      const id = dotText(tokens[0]!);
      expect(doc.nodes.has(id), `node ${id} declared twice`).toBe(false);
      doc.nodes.set(id, attributes(tokens.slice(1)));
    }
  }
  for (const edge of doc.edges) {
    expect(doc.nodes.has(edge.from)).toBe(true);
    expect(doc.nodes.has(edge.to)).toBe(true);
  }
  return doc;
}

// ---------------------------------------------------------------------------------------

describe('templateGraph', () => {
  it('models cognitive-reasoner: a start node with one labelled edge per mode and a default edge', async () => {
    const t = await loadTemplate(new URL('cognitive-reasoner.json', EXAMPLES).pathname);
    const graph = templateGraph(t);
    expect(graph.nodes[0]).toMatchObject({ id: '__start__', kind: 'start', isDefault: false, sequence: [] });
    expect(graph.nodes.slice(1).map((n) => n.id)).toEqual(t.orchestration!.steps.map((s) => s.name));
    expect(graph.nodes[1]).toEqual({
      id: 'ResearchMode',
      kind: 'step',
      label: 'ResearchMode',
      description: 'Research-based cognitive flow',
      isDefault: false,
      sequence: [['search'], ['think'], ['reflect']],
    });
    expect(graph.edges[1]).toEqual({
      from: '__start__',
      to: 'ProblemSolvingMode',
      label: 'message matches /\\b(solve|solving|how can|how do we|problems?)\\b/i',
      kind: 'condition',
    });
    // DefaultMode has a condition (described) and is the default: two edges.
    expect(graph.edges.filter((e) => e.to === 'DefaultMode')).toEqual([
      {
        from: '__start__',
        to: 'DefaultMode',
        label: 'any other message, so each message picks its mode afresh',
        kind: 'condition',
      },
      { from: '__start__', to: 'DefaultMode', label: 'default', kind: 'default' },
    ]);
    expect(graph.nodes.find((n) => n.id === 'DefaultMode')?.isDefault).toBe(true);
  });

  it('gives steps without conditions that are not default no incoming edge (orchestrated-agent)', async () => {
    const t = await loadTemplate(agentdockSample('orchestrated-agent'));
    const graph = templateGraph(t);
    const targets = new Set(graph.edges.map((e) => e.to));
    expect(graph.nodes).toHaveLength(t.orchestration!.steps.length + 1);
    expect(targets).toEqual(new Set(['Initial Greeting', 'Tool Follow-up Mode']));
    expect(graph.edges.find((e) => e.to === 'Tool Follow-up Mode')?.label).toBe(
      // Conditions with a description show it; they are joined with "and".
      t
        .orchestration!.steps.at(-1)!
        .conditions!.map((c) => c.description ?? `used ${c.value}`)
        .join(' and '),
    );
    expect(graph.nodes.find((n) => n.id === 'Research Sequence')?.sequence).toEqual([['search'], ['think']]);
  });

  it('describes every built-in condition type, custom types and flags, and joins them with "and"', () => {
    const t = template(
      [
        {
          name: 'All',
          sequence: ['search', ['think', 'reflect']],
          conditions: [
            { type: 'tool_used', value: 'search' },
            { type: 'sequence_match' },
            { type: 'message_contains', value: 'Find "this"' },
            { type: 'message_regex', value: 'research|find', flags: 'im' },
            { type: 'message_regex', value: 'x' },
            { type: 'not_recently_used', value: 'think', window: 3 },
            { type: 'not_recently_used', value: 'reflect' },
          ],
        },
        { name: 'Idle', isDefault: true },
      ],
      { tools: ['search', 'think', 'reflect'] },
    );
    expect(templateGraph(t).edges).toEqual([
      {
        from: '__start__',
        to: 'All',
        kind: 'condition',
        label: [
          'used search',
          'last tools were search → think|reflect',
          'message contains "Find \\"this\\""',
          'message matches /research|find/im',
          'message matches /x/i',
          'think not used in the last 3 tools',
          'reflect not used in the last 5 tools',
        ].join(' and '),
      },
      { from: '__start__', to: 'Idle', kind: 'default', label: 'default' },
    ]);
  });

  it('labels custom condition types as "type: value"', async () => {
    const { ConditionRegistry } = await import('./conditions.js');
    const registry = new ConditionRegistry().register({ type: 'time_of_day', evaluate: () => true });
    const result = (await import('./validate-template.js')).validateTemplate(
      {
        id: 't',
        orchestration: {
          steps: [
            { name: 'Night', conditions: [{ type: 'time_of_day', value: 'night' }] },
            { name: 'Any', conditions: [{ type: 'time_of_day' }] },
          ],
        },
      },
      { conditions: registry },
    );
    expect(result.success).toBe(true);
    if (!result.success) return;
    expect(templateGraph(result.template).edges.map((e) => e.label)).toEqual(['time_of_day: night', 'time_of_day']);
  });

  it('takes the default from defaultStep as well as isDefault', () => {
    const t = template([{ name: 'a' }, { name: 'b' }], { orchestration: { defaultStep: 'b' } });
    const graph = templateGraph(t);
    expect(graph.edges).toEqual([{ from: '__start__', to: 'b', label: 'default', kind: 'default' }]);
    expect(graph.nodes.map((n) => n.isDefault)).toEqual([false, false, true]);
  });

  it('is just the start node for a template without orchestration, in every format', () => {
    const t = parseTemplate({ id: 'plain', tools: ['search'] });
    expect(templateGraph(t)).toEqual({
      nodes: [
        {
          id: '__start__',
          kind: 'start',
          label: 'any message / tool use',
          description: null,
          isDefault: false,
          sequence: [],
        },
      ],
      edges: [],
    });
    const mermaid = readMermaid(toMermaid(t));
    expect([...mermaid.nodes.keys()]).toEqual(['entry']);
    expect(mermaid.edges).toEqual([]);
    const dot = readDot(toDot(t));
    expect([...dot.nodes.keys()]).toEqual(['__start__']);
  });

  it('keeps the start id unique when a step is called __start__', () => {
    const t = template([{ name: '__start__', isDefault: true }, { name: '___start___' }]);
    const graph = templateGraph(t);
    const ids = graph.nodes.map((n) => n.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(graph.edges).toEqual([{ from: graph.nodes[0]!.id, to: '__start__', label: 'default', kind: 'default' }]);
    expect(readDot(toDot(t)).edges[0]).toMatchObject({ from: graph.nodes[0]!.id, to: '__start__' });
  });
});

describe.each(templateFiles)('%s', (file) => {
  it('renders Mermaid and DOT with one node per step, edges between declared nodes, the active step highlighted', async () => {
    const t = await loadTemplate(file);
    const steps = t.orchestration?.steps ?? [];
    const graph = templateGraph(t);
    expect(graph.nodes).toHaveLength(steps.length + 1);
    const ids = new Set(graph.nodes.map((n) => n.id));
    for (const edge of graph.edges) expect(ids.has(edge.from) && ids.has(edge.to)).toBe(true);
    const reachable = steps.filter(
      (s) => (s.conditions ?? []).length > 0 || graph.nodes.find((n) => n.id === s.name)?.isDefault,
    );
    expect(new Set(graph.edges.map((e) => e.to))).toEqual(new Set(reachable.map((s) => s.name)));

    const active = steps.at(-1)?.name;
    const mermaid = readMermaid(toMermaid(t, { activeStep: active }));
    expect(mermaid.header).toBe('flowchart LR');
    const stepIds = [...mermaid.nodes.keys()].filter((id) => id !== 'entry');
    expect(stepIds.map((id) => mermaid.nodes.get(id)![0])).toEqual(steps.map((s) => s.name));
    expect(mermaid.edges).toHaveLength(graph.edges.length);
    if (active !== undefined) expect(mermaid.classes.get('active')).toEqual([stepIds.at(-1)]);
    else expect(mermaid.classes.has('active')).toBe(false);

    const dot = readDot(toDot(t, { activeStep: active }));
    expect(dot.name).toBe(t.id);
    expect([...dot.nodes.keys()]).toEqual(graph.nodes.map((n) => n.id));
    expect(dot.edges.map((e) => [e.from, e.to])).toEqual(graph.edges.map((e) => [e.from, e.to]));
    if (active !== undefined) expect(dot.nodes.get(active)?.get('fillcolor')).toBe('"#ffd54f"');
  });
});

describe('rendering', () => {
  const cognitive = loadTemplate(new URL('cognitive-reasoner.json', EXAMPLES).pathname);

  it('writes sequences into the step nodes, alternatives joined with |', () => {
    const t = template([{ name: 'R', isDefault: true, sequence: ['search', ['think', 'reflect'], 'summarize'] }]);
    const mermaid = readMermaid(toMermaid(t));
    expect(mermaid.nodes.get('s0')).toEqual(['R', 'search → think|reflect → summarize', '(default)']);
    expect(mermaid.edges).toEqual([{ from: 'entry', to: 's0', dashed: true, label: 'default' }]);
    const dot = readDot(toDot(t));
    expect(dotText(dot.nodes.get('R')!.get('label')!)).toBe('R\nsearch → think|reflect → summarize\n(default)');
    expect(dot.edges[0]!.attributes.get('style')).toBe('dashed');
  });

  it('highlights the active step and ignores an active step that names no step', async () => {
    const t = await cognitive;
    const plain = toMermaid(t);
    expect(plain).not.toContain('classDef active');
    expect(toMermaid(t, { activeStep: 'NoSuchMode' })).toBe(plain);
    expect(toDot(t, { activeStep: 'NoSuchMode' })).toBe(toDot(t));
    expect(toDot(t, { activeStep: '__start__' })).toBe(toDot(t)); // the start node is not a step
    const doc = readMermaid(toMermaid(t, { activeStep: 'EvaluationMode' }));
    expect(doc.classes.get('active')).toEqual(['s2']);
    const dot = readDot(toDot(t, { activeStep: 'EvaluationMode' }));
    expect(dot.nodes.get('EvaluationMode')?.get('style')).toBe('"rounded,filled,bold"');
    expect(dot.nodes.get('ResearchMode')?.has('fillcolor')).toBe(false);
  });

  it('marks steps that can never become active', async () => {
    const t = await loadTemplate(agentdockSample('history-mentor'));
    const doc = readMermaid(toMermaid(t));
    const never = doc.classes.get('unreachable')!.map((id) => doc.nodes.get(id)![0]);
    expect(never).toEqual(['Fact Verification Mode']);
    expect(readDot(toDot(t)).nodes.get('Fact Verification Mode')?.get('style')).toBe('"rounded,dashed"');
  });

  it('lays out top-down on request', async () => {
    const t = await cognitive;
    expect(toMermaid(t, { direction: 'TD' }).split('\n')[0]).toBe('flowchart TD');
    expect(toDot(t, { direction: 'TD' })).toContain('rankdir=TB;');
  });

  it('cuts very long edge labels in the rendering but keeps them whole in the graph', async () => {
    const t = await cognitive;
    const full = templateGraph(t).edges[0]!.label;
    expect(full.length).toBeGreaterThan(80);
    const rendered = readMermaid(toMermaid(t)).edges[0]!.label;
    expect([...rendered]).toHaveLength(80);
    expect(rendered.endsWith('…')).toBe(true);
    expect(full.startsWith(rendered.slice(0, -1))).toBe(true);
  });
});

/** What a DOT id keeps of a name. */
function dotClean(name: string): string {
  return [...name]
    .map((c) => (c !== '\t' && c !== '\n' && c !== '\r' && c.charCodeAt(0) < 0x20 ? '\ufffd' : c))
    .join('');
}

describe('adversarial step names', () => {
  const nasty = [
    'say "hi"',
    'a[b]c',
    'x{y}(z)',
    'A --> B',
    'a -.-> b |c|',
    'line1\nline2',
    'tab\there',
    'back\\slash \\N \\G',
    'trailing\\',
    '#quot; #35; &amp; <b>bold</b>',
    '%% comment',
    'semi;colon',
    '`code`',
    'emoji 🚀 and ünïcödé 名前',
    'end',
    'ﬂ°°34¶ß',
  ];

  it('survives Mermaid and DOT as exact labels, with nothing raw that could break the syntax', () => {
    const steps: OrchestrationStep[] = nasty.map((name, i) => ({
      name,
      description: name,
      ...(i === 0 ? { isDefault: true } : {}),
      conditions: [{ type: 'message_contains', value: name }],
      sequence: [name, [name, 'other']],
    }));
    const t = template(steps, { id: 'id "with" \\ quotes\n', tools: [...nasty, 'other'] });
    const mermaid = readMermaid(toMermaid(t, { activeStep: 'A --> B' }));
    const labels = [...mermaid.nodes.entries()].filter(([id]) => id !== 'entry').map(([, lines]) => lines);
    // Mermaid labels are one line: a line break in a name becomes a space.
    const oneLine = (s: string) => s.replace(/[\n\t]/g, ' ');
    expect(labels.map((l) => l[0])).toEqual(nasty.map(oneLine));
    expect(labels.map((l) => l[1])).toEqual(nasty.map((n) => `${oneLine(n)} → ${oneLine(n)}|other`));
    expect(mermaid.edges.filter((e) => !e.dashed).map((e) => e.label)).toEqual(
      nasty.map((n) => `message contains ${JSON.stringify(n)}`),
    );
    expect(mermaid.classes.get('active')).toEqual(['s3']);

    const dot = readDot(toDot(t, { activeStep: 'line1\nline2' }));
    expect(dot.name).toBe('id "with" \\ quotes\n');
    expect([...dot.nodes.keys()].slice(1)).toEqual(nasty);
    expect(dot.nodes.get('line1\nline2')?.get('fillcolor')).toBe('"#ffd54f"');
    expect(dotText(dot.nodes.get('trailing\\')!.get('label')!)).toBe('trailing\\\ntrailing\\ → trailing\\|other');
  });

  it('keeps Mermaid and DOT well-formed for any step names (property)', () => {
    fc.assert(
      fc.property(
        // Names that differ only in control characters other than tab and line breaks would
        // share a DOT id; nobody names steps like that.
        fc.uniqueArray(fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }), {
          minLength: 1,
          maxLength: 6,
          selector: (s) => dotClean(s),
        }),
        (names) => {
          const t = template(
            names.map((name, i) =>
              i === 0 ? { name, isDefault: true } : { name, conditions: [{ type: 'message_contains', value: name }] },
            ),
          );
          const mermaid = readMermaid(toMermaid(t, { activeStep: names.at(-1) }));
          const clean = (s: string) =>
            [...s].map((c) => (c.charCodeAt(0) < 0x20 || c === '\u2028' || c === '\u2029' ? ' ' : c)).join('');
          expect([...mermaid.nodes.values()].slice(1).map((l) => l[0])).toEqual(names.map(clean));
          expect(mermaid.edges.length).toBe(names.length);
          const dot = readDot(toDot(t, { activeStep: names.at(-1) }));
          expect([...dot.nodes.keys()].slice(1)).toEqual(names.map(dotClean));
        },
      ),
      { numRuns: 300 },
    );
  });
});
