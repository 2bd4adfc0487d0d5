/**
 * The step graph in the order the engine checks it: the start ("any message / tool use") at the
 * top, then every step, first checked first, each with its conditions written beside it. The
 * first step whose conditions all hold becomes active; the active step is highlighted.
 */
import type { StepGraph as StepGraphData } from './types.js';

/** One step of the graph, as the list shows it. */
interface StepRow {
  id: string;
  description: string | null;
  isDefault: boolean;
  /** `search → think|reflect`, or empty. */
  sequence: string;
  /** The conditions in words (all must hold), or null when the step has none. */
  conditions: string | null;
}

/** `search → think|reflect`. */
export function sequenceText(sequence: readonly (readonly string[])[]): string {
  return sequence.map((alternatives) => alternatives.join('|')).join(' → ');
}

/** The steps of `graph` in configuration order, which is the order they are checked in. */
export function stepRows(graph: StepGraphData): StepRow[] {
  return graph.nodes
    .filter((node) => node.kind === 'step')
    .map((node) => ({
      id: node.id,
      description: node.description,
      isDefault: node.isDefault,
      sequence: sequenceText(node.sequence),
      conditions: graph.edges.find((edge) => edge.to === node.id && edge.kind === 'condition')?.label ?? null,
    }));
}

/** The graph of the agent's steps, with `activeStep` highlighted. */
export function StepGraph({ graph, activeStep }: { graph: StepGraphData; activeStep: string | null }) {
  const start = graph.nodes.find((node) => node.kind === 'start');
  const rows = stepRows(graph);
  return (
    <figure className="step-graph" data-testid="step-graph">
      <div className="graph-start" title={start?.description ?? undefined}>
        {start?.label ?? 'any message / tool use'}
      </div>
      <ol className="step-ladder" aria-label="Steps, in the order they are checked">
        {rows.map((row, index) => {
          const active = row.id === activeStep;
          const unreachable = row.conditions === null && !row.isDefault;
          const classes = ['step-row', active && 'active', row.isDefault && 'default', unreachable && 'unreachable']
            .filter(Boolean)
            .join(' ');
          return (
            <li key={row.id} className={classes}>
              <div
                className="node"
                data-testid="graph-node"
                data-step={row.id}
                data-active={active ? 'true' : 'false'}
                aria-current={active ? 'step' : undefined}
                title={row.description ?? undefined}
              >
                <span className="node-rank" aria-hidden="true">
                  {index + 1}
                </span>
                <span className="node-label">{row.id}</span>
                {active && <span className="visually-hidden"> (active now)</span>}
                {row.sequence && <span className="node-detail">{row.sequence}</span>}
              </div>
              <div className="step-conditions" data-testid="step-conditions" data-step={row.id}>
                {row.conditions !== null && <span className="condition">{row.conditions}</span>}
                {row.isDefault && (
                  <span className="condition-default">
                    {row.conditions === null ? 'default' : 'or by default'}: when no step matches and none is active
                  </span>
                )}
                {unreachable && (
                  <span className="condition-never">never active: no conditions, and not the default step</span>
                )}
              </div>
            </li>
          );
        })}
      </ol>
      <figcaption className="muted">
        At every message and tool use the steps are checked top to bottom; the first whose conditions all hold becomes
        active.
      </figcaption>
    </figure>
  );
}
