/**
 * What of the session a rule's `when` reads: the history, the sequence position, the active
 * step. Those are what a running call's completion changes (`dependence.ts`): a rule that reads
 * none of them answers the same whether the running calls complete or not, so a request need not
 * wait for them on its account. Found once per rule, on the expression's AST, when the template
 * compiles.
 */

/**
 * The parts of `state` an expression reads: the history (`recentlyUsedTools`), the sequence
 * position, the active step, token usage. An expression that uses `state` any other way (passes
 * it whole, indexes it with a computed key) reads all of them.
 */
export interface StateReads {
  readonly history: boolean;
  readonly sequence: boolean;
  readonly step: boolean;
}

/** What an expression that never names `state` reads. */
export const READS_NOTHING: StateReads = Object.freeze({ history: false, sequence: false, step: false });
const READS_ALL: StateReads = Object.freeze({ history: true, sequence: true, step: true });

/**
 * What of `state` an expression's AST reads. A comprehension variable that happens to be named
 * `state` counts as the session too: over-reading only makes a request wait, never run early.
 */
export function stateReads(ast: unknown): StateReads {
  const found = { history: false, sequence: false, step: false, all: false };
  visitState(ast, undefined, found);
  if (found.all) return READS_ALL;
  if (!found.history && !found.sequence && !found.step) return READS_NOTHING;
  return Object.freeze({ history: found.history, sequence: found.sequence, step: found.step });
}

function visitState(
  node: unknown,
  parent: { op?: unknown; args?: unknown } | undefined,
  found: { history: boolean; sequence: boolean; step: boolean; all: boolean },
): void {
  if (Array.isArray(node)) {
    for (const item of node) visitState(item, parent, found);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  const current = node as { op?: unknown; args?: unknown };
  if (current.op === 'id' && current.args === 'state') {
    const args = Array.isArray(parent?.args) ? (parent.args as unknown[]) : [];
    let field: unknown;
    if (parent?.op === '.' && args[0] === node) field = args[1];
    else if (parent?.op === '[]' && args[0] === node) {
      const key = args[1] as { op?: unknown; args?: unknown } | undefined;
      if (key?.op === 'value') field = key.args;
    }
    if (field === 'recentlyUsedTools') found.history = true;
    else if (field === 'sequenceIndex') found.sequence = true;
    else if (field === 'activeStep') found.step = true;
    else if (field !== 'cumulativeTokenUsage') found.all = true;
    return;
  }
  visitState(current.args, current, found);
}
