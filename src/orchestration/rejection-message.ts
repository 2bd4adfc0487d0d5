/**
 * `rejectionMessage()`: the one text a refused tool call gets, whichever shell refused it (the AI
 * SDK loop, the MCP gateway), so a model reads the same reason everywhere.
 */
import type { ToolDenial } from '../core/events.js';

/**
 * The message a refused call gets: why (the reason `explain()` gives, or a shell's own, such as
 * a person's decline at the MCP gateway), and what the model may call instead.
 */
export function rejectionMessage(
  tool: string,
  reason: Pick<ToolDenial, 'message'>,
  allowedTools: readonly string[],
): string {
  const instead = allowedTools.length
    ? `Allowed tools now: ${allowedTools.join(', ')}.`
    : 'No tool is allowed now; answer without tools.';
  return `Tool "${tool}" was not run: ${reason.message}. ${instead}`;
}
