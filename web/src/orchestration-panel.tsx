/**
 * The orchestration as it stands: active step, step graph, sequence, tools allowed or blocked,
 * facts and labels, recent tools, token usage and the last turn's model steps, updated from the stream's
 * `data-orchestration` parts and from the session API; then the session timeline, from the
 * session's event log.
 */

import { ActiveStep } from './active-step.js';
import { declaresFacts, FactsAndLabels } from './facts-and-labels.js';
import type { LiveTool } from './live-tools.js';
import { RecentTools } from './recent-tools.js';
import { SequenceStrip } from './sequence-strip.js';
import { SessionTimelinePanel } from './session-timeline.js';
import { StepGraph } from './step-graph.js';
import { TokenUsage } from './token-usage.js';
import { ToolList } from './tool-list.js';
import { TurnTimeline } from './turn-timeline.js';
import type { AgentDetailResponse, OrchestrationSnapshot, TimelineEntry } from './types.js';
import type { SessionTimeline } from './use-session-timeline.js';

const NO_USAGE = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };

/** The orchestration column. */
export function OrchestrationPanel({
  agent,
  snapshot,
  tools,
  timeline,
  sessionTimeline,
  hasSession,
}: {
  agent: AgentDetailResponse | null;
  snapshot: OrchestrationSnapshot | null;
  tools: LiveTool[] | null;
  timeline: TimelineEntry[];
  sessionTimeline: SessionTimeline;
  hasSession: boolean;
}) {
  const activeStep = snapshot?.activeStep ?? null;
  // Only agents whose template declares facts or labels get the section (or a session that has some).
  const showFacts = declaresFacts(agent) || snapshot?.facts !== undefined || snapshot?.labels !== undefined;
  return (
    <section id="orchestration-panel" className="panel orchestration-panel" aria-labelledby="orchestration-title">
      <h2 id="orchestration-title" className="panel-title">
        Orchestration
      </h2>

      <div className="orchestration-grid">
        <div className="orchestration-column">
          <ActiveStep snapshot={snapshot} />

          <section className="subpanel" aria-labelledby="graph-title">
            <h3 id="graph-title">Steps</h3>
            {agent ? (
              <StepGraph graph={agent.graph} activeStep={activeStep} />
            ) : (
              <p className="muted">Loading the agent…</p>
            )}
          </section>
        </div>
        <div className="orchestration-column">
          <section className="subpanel" aria-labelledby="sequence-title">
            <h3 id="sequence-title">Sequence</h3>
            <SequenceStrip sequence={snapshot?.sequence ?? null} step={activeStep} />
          </section>

          <section className="subpanel" aria-labelledby="tools-title">
            <h3 id="tools-title">Tools</h3>
            <ToolList tools={tools} agentTools={agent?.tools ?? []} />
          </section>

          {showFacts && (
            <section className="subpanel" aria-labelledby="facts-title">
              <h3 id="facts-title">Facts and labels</h3>
              <FactsAndLabels snapshot={snapshot} />
            </section>
          )}

          <div className="subpanel-row">
            <section className="subpanel" aria-labelledby="recent-title">
              <h3 id="recent-title">Recently used</h3>
              <RecentTools tools={snapshot?.recentlyUsedTools ?? []} />
            </section>
            <section className="subpanel" aria-labelledby="tokens-title">
              <h3 id="tokens-title">Tokens (session)</h3>
              <TokenUsage usage={snapshot?.tokenUsage ?? NO_USAGE} />
            </section>
          </div>

          <section className="subpanel" aria-labelledby="timeline-title">
            <h3 id="timeline-title">Last turn</h3>
            <TurnTimeline entries={timeline} />
          </section>
        </div>
      </div>

      <SessionTimelinePanel
        timeline={sessionTimeline}
        agentTools={agent?.tools ?? []}
        hasSession={hasSession}
        showFacts={declaresFacts(agent)}
      />
    </section>
  );
}
