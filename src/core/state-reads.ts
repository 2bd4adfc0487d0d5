/**
 * What of the session a rule's `when` reads: the history, the sequence position, the active
 * step, the facts and labels (SPEC section 11). Those are what a running call's completion
 * changes (`dependence.ts`): a rule that reads none of them answers the same whether the running
 * calls complete or not, so a request need not wait for them on its account. Found once per rule,
 * on the expression's AST, when the template compiles.
 */

/**
 * The parts of `state` an expression reads: the history (`recentlyUsedTools`), the sequence
 * position, the active step, the facts it names (`state.facts.<name>`; `all` when it reads the
 * facts any other way) and the labels. An expression that uses `state` any other way (passes it
 * whole, indexes it with a computed key) reads all of them.
 */
export interface StateReads {
  readonly history: boolean;
  readonly sequence: boolean;
  readonly step: boolean;
  readonly facts: readonly string[] | 'all';
  readonly labels: boolean;
}

const NO_FACTS: readonly string[] = Object.freeze([]);

/** What an expression that never names `state` reads. */
export const READS_NOTHING: StateReads = Object.freeze({
  history: false,
  sequence: false,
  step: false,
  facts: NO_FACTS,
  labels: false,
});
const READS_ALL: StateReads = Object.freeze({ history: true, sequence: true, step: true, facts: 'all', labels: true });

interface Found {
  history: boolean;
  sequence: boolean;
  step: boolean;
  labels: boolean;
  facts: Set<string> | 'all';
  all: boolean;
}

/**
 * What of `state` an expression's AST reads. A comprehension variable that happens to be named
 * `state` counts as the session too: over-reading only makes a request wait, never run early.
 */
export function stateReads(ast: unknown): StateReads {
  const found: Found = { history: false, sequence: false, step: false, labels: false, facts: new Set(), all: false };
  visitState(ast, [], found);
  if (found.all) return READS_ALL;
  const facts = found.facts === 'all' ? 'all' : found.facts.size === 0 ? NO_FACTS : Object.freeze([...found.facts]);
  if (!found.history && !found.sequence && !found.step && !found.labels && facts === NO_FACTS) return READS_NOTHING;
  return Object.freeze({
    history: found.history,
    sequence: found.sequence,
    step: found.step,
    facts,
    labels: found.labels,
  });
}

type Node = { op?: unknown; args?: unknown };

/** The field `node` selects of what `parent` reads it from (`x.f`, `x['f']`), if it is one. */
function selected(node: unknown, parent: Node | undefined): unknown {
  const args = Array.isArray(parent?.args) ? (parent.args as unknown[]) : [];
  if (args[0] !== node) return undefined;
  if (parent?.op === '.') return args[1];
  if (parent?.op === '[]') {
    const key = args[1] as Node | undefined;
    if (key?.op === 'value') return key.args;
  }
  return undefined;
}

function visitState(node: unknown, ancestors: Node[], found: Found): void {
  if (Array.isArray(node)) {
    for (const item of node) visitState(item, ancestors, found);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  const current = node as Node;
  if (current.op === 'id' && current.args === 'state') {
    const parent = ancestors.at(-1);
    const field = selected(node, parent);
    if (field === 'recentlyUsedTools') found.history = true;
    else if (field === 'sequenceIndex') found.sequence = true;
    else if (field === 'activeStep') found.step = true;
    else if (field === 'labels') found.labels = true;
    else if (field === 'facts') {
      const name = selected(parent, ancestors.at(-2));
      if (typeof name === 'string' && found.facts !== 'all') found.facts.add(name);
      else found.facts = 'all';
    } else if (field !== 'cumulativeTokenUsage') found.all = true;
    return;
  }
  ancestors.push(current);
  visitState(current.args, ancestors, found);
  ancestors.pop();
}
