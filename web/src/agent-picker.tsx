/**
 * Chooses the agent to chat with. A native select, so it works with the keyboard as it is.
 */
import type { AgentSummary } from './types.js';

/** The agent select; disabled while the list loads. */
export function AgentPicker({
  agents,
  agentId,
  onSelect,
}: {
  agents: AgentSummary[] | null;
  agentId: string | null;
  onSelect: (agentId: string) => void;
}) {
  return (
    <label className="field agent-picker">
      <span className="field-label">Agent</span>
      <select
        data-testid="agent-picker"
        value={agentId ?? ''}
        disabled={!agents || agents.length === 0}
        onChange={(event) => onSelect(event.target.value)}
      >
        {!agents && <option value="">Loading…</option>}
        {agents?.length === 0 && <option value="">No agents</option>}
        {agents?.map((agent) => (
          <option key={agent.id} value={agent.id} title={agent.description}>
            {agent.name}
          </option>
        ))}
      </select>
    </label>
  );
}
