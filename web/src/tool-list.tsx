/**
 * Every tool of the agent: allowed now, or blocked and why (from `GET /api/sessions/:id`).
 */
import type { ToolStatus } from './types.js';

/** The tool list; before the first answer there is no session, so it lists the agent's tools only. */
export function ToolList({ tools, agentTools }: { tools: ToolStatus[] | null; agentTools: string[] }) {
  if (!tools) {
    return (
      <ul className="tool-list" data-testid="tool-list">
        {agentTools.map((tool) => (
          <li key={tool} className="tool-status" data-testid="tool-status" data-tool={tool} data-allowed="unknown">
            <span className="tool-name">{tool}</span>
            <span className="badge badge-todo">no session yet</span>
          </li>
        ))}
      </ul>
    );
  }
  return (
    <ul className="tool-list" data-testid="tool-list">
      {tools.map(({ tool, allowed, reason }) => (
        <li
          key={tool}
          className={`tool-status ${allowed ? 'is-allowed' : 'is-blocked'}`}
          data-testid="tool-status"
          data-tool={tool}
          data-allowed={String(allowed)}
        >
          <span className="tool-name">{tool}</span>
          <span className={`badge ${allowed ? 'badge-done' : 'badge-blocked'}`}>{allowed ? 'allowed' : 'blocked'}</span>
          {reason && (
            <span className="tool-reason" data-testid="tool-reason">
              {reason.message} <code className="reason-code">{reason.code}</code>
            </span>
          )}
        </li>
      ))}
    </ul>
  );
}
