/**
 * What of a template a gateway cannot honour: it sees tool calls, never the conversation, so
 * anything that waits for a user message would silently never happen. Such a template is
 * refused at start, naming each place, rather than run with a changed meaning.
 */
import { type ConditionRegistry, defaultConditionRegistry } from '../core/conditions.js';
import type { AgentTemplate } from '../core/schema.js';

/** Where a template depends on user messages: one line per place, e.g. `step "Research": condition message_regex`. */
export function messageDependencies(
  template: AgentTemplate,
  registry: ConditionRegistry = defaultConditionRegistry,
): string[] {
  const found: string[] = [];
  const orchestration = template.orchestration;
  if (orchestration === undefined) return found;
  const limits = (rules: readonly { limit?: { per: string } | undefined }[] | undefined, where: string) => {
    (rules ?? []).forEach((rule, i) => {
      // A turn starts with a user message; a gateway has none, so "per turn" would mean "per session".
      if (rule.limit?.per === 'turn')
        found.push(`${where}rules[${i}]: limit per "turn" (use "session", "step" or a window such as "10m")`);
    });
  };
  limits(orchestration.rules, '');
  for (const step of orchestration.steps) {
    const where = `step "${step.name}": `;
    for (const condition of step.conditions ?? []) {
      if (registry.messageUse(condition) !== 'none') found.push(`${where}condition ${condition.type}`);
    }
    for (const reset of step.resetSequenceOn ?? []) {
      if (typeof reset === 'string') {
        // "new_message", or the name of a message condition type: both wait for a user message.
        if (reset === 'new_message' || registry.get(reset)?.usesMessage === true)
          found.push(`${where}resetSequenceOn "${reset}"`);
      } else if (registry.messageUse(reset) !== 'none') {
        found.push(`${where}resetSequenceOn condition ${reset.type}`);
      }
    }
    limits(step.rules, where);
  }
  return found;
}
