/**
 * The step graph: the start pseudo-node ("any message / tool use"), an edge per condition to
 * each step, the default edge dashed, and the active step highlighted. Laid out by dagre and
 * drawn as SVG here, scaled to the panel's width.
 */
import { useEffect, useId, useMemo, useRef, useState } from 'react';
import { DETAIL_FONT, EDGE_FONT, layoutGraph, type MeasureText, NODE_FONT } from './graph-layout.js';
import type { StepGraph as StepGraphData } from './types.js';

const FONT_FAMILY = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const MONO_FAMILY = 'ui-monospace, "SFMono-Regular", "Cascadia Mono", Menlo, Consolas, monospace';
/** Below this scale the labels are unreadable: the graph scrolls sideways instead. */
const MIN_SCALE = 0.8;

let context: CanvasRenderingContext2D | null | undefined;

/** Text width as the browser will draw it (a canvas), or an estimate where there is none. */
const measure: MeasureText = (text, fontSize, font) => {
  if (context === undefined) context = document.createElement('canvas').getContext('2d');
  if (!context) return text.length * fontSize * 0.62;
  context.font = `${fontSize}px ${font === 'mono' ? MONO_FAMILY : FONT_FAMILY}`;
  return context.measureText(text).width;
};

/** The graph of the agent's steps, with `activeStep` highlighted. */
export function StepGraph({ graph, activeStep }: { graph: StepGraphData; activeStep: string | null }) {
  const figure = useRef<HTMLElement>(null);
  const [available, setAvailable] = useState<number | null>(null);
  useEffect(() => {
    const element = figure.current;
    if (!element) return;
    const observer = new ResizeObserver(([entry]) => setAvailable(entry?.contentRect.width ?? null));
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  const full = useMemo(() => layoutGraph(graph, measure), [graph]);
  const compactLayout = useMemo(() => layoutGraph(graph, measure, true), [graph]);
  // Where the labelled graph would shrink past readability, drop the labels (kept as tooltips).
  const compact = available !== null && available < full.width * MIN_SCALE;
  const layout = compact ? compactLayout : full;
  const arrow = `arrow-${useId().replace(/[^a-zA-Z0-9_-]/g, '')}`;
  const activeArrow = `${arrow}-active`;

  return (
    <figure className="step-graph" data-testid="step-graph" ref={figure} data-compact={compact}>
      <svg
        viewBox={`0 0 ${layout.width} ${layout.height}`}
        width={layout.width}
        role="img"
        aria-label={`Step graph${activeStep ? `, active step ${activeStep}` : ''}`}
        style={{ fontFamily: FONT_FAMILY, minWidth: compact ? undefined : Math.round(layout.width * MIN_SCALE) }}
      >
        <defs>
          <marker id={arrow} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
            <path d="M0,0 L10,5 L0,10 z" className="arrow" />
          </marker>
          <marker id={activeArrow} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
            <path d="M0,0 L10,5 L0,10 z" className="arrow arrow-active" />
          </marker>
        </defs>
        {layout.edges.map((edge) => {
          const active = edge.to === activeStep;
          return (
            <g key={edge.key} className={`edge edge-${edge.kind}${active ? ' active' : ''}`} data-to={edge.to}>
              <title>{`${edge.to}: ${edge.label}`}</title>
              <path d={edge.path} markerEnd={`url(#${active ? activeArrow : arrow})`} />
              {edge.shortLabel && (
                <text
                  x={edge.labelX}
                  y={edge.labelY}
                  fontSize={EDGE_FONT}
                  textAnchor="middle"
                  dominantBaseline="central"
                >
                  {edge.shortLabel}
                </text>
              )}
            </g>
          );
        })}
        {layout.nodes.map((node) => {
          const active = node.kind === 'step' && node.id === activeStep;
          const classes = ['node', `node-${node.kind}`, active && 'active', node.unreachable && 'unreachable']
            .filter(Boolean)
            .join(' ');
          const cx = node.x + node.width / 2;
          return (
            <g
              key={node.id}
              className={classes}
              data-testid="graph-node"
              data-step={node.kind === 'step' ? node.id : undefined}
              data-active={active ? 'true' : 'false'}
              aria-current={active ? 'step' : undefined}
            >
              <title>
                {[
                  node.label,
                  node.description,
                  node.sequenceText && `sequence: ${node.sequenceText}`,
                  node.isDefault && 'default step',
                  node.unreachable && 'can never become active',
                  active && 'active now',
                ]
                  .filter(Boolean)
                  .join('\n')}
              </title>
              <rect
                x={node.x}
                y={node.y}
                width={node.width}
                height={node.height}
                rx={node.kind === 'start' ? node.height / 2 : 8}
              />
              {node.sequenceText ? (
                <>
                  <text x={cx} y={node.y + 17} fontSize={NODE_FONT} textAnchor="middle" className="node-label">
                    {node.label}
                    {node.isDefault ? ' (default)' : ''}
                  </text>
                  <text
                    x={cx}
                    y={node.y + 35}
                    fontSize={DETAIL_FONT}
                    textAnchor="middle"
                    className="node-detail"
                    style={{ fontFamily: MONO_FAMILY }}
                  >
                    {node.sequenceText}
                  </text>
                </>
              ) : (
                <text
                  x={cx}
                  y={node.y + node.height / 2}
                  fontSize={NODE_FONT}
                  textAnchor="middle"
                  dominantBaseline="central"
                  className="node-label"
                >
                  {node.label}
                  {node.isDefault ? ' (default)' : ''}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption className="muted">
        Every message and tool use picks the first step whose conditions hold; the dashed edge is the default.
      </figcaption>
      {compact && (
        <details className="conditions">
          <summary>Conditions</summary>
          <ul>
            {layout.edges.map((edge) => (
              <li key={edge.key}>
                <strong>{edge.to}</strong>: <code>{edge.label}</code>
              </li>
            ))}
          </ul>
        </details>
      )}
    </figure>
  );
}
