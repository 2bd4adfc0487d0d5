/**
 * The README's library example, runnable: `npm run example examples/library.ts` in a clone of
 * the repository (no build needed), or `npx tsx node_modules/baton-agents/examples/library.ts`
 * in an app that installed the package.
 */
import { fileURLToPath } from 'node:url';
import { createOrchestrationManager, loadTemplate } from 'baton-agents';

const template = await loadTemplate(fileURLToPath(new URL('./agents/cognitive-reasoner.json', import.meta.url)));
const manager = createOrchestrationManager({
  store: 'memory:', // or 'sqlite:.baton/state.db', 'redis://…', 'postgres://…', or a store object
  onEvent: (event) => console.log(`event: ${event.type}`), // step-changed, sequence-advanced, ...
});

const messages = [{ role: 'user', content: 'Critique the argument that remote work improves productivity' }];
const allowed = await manager.getAllowedTools(template, messages, 'session-1', template.tools);
console.log(`allowed: ${allowed.join(', ')}`); // critique: the first tool of EvaluationMode's sequence
// ... the model calls one of `allowed`, the tool runs ...
await manager.processToolUsage(template, messages, 'session-1', 'critique');

// Why is a tool blocked right now?
const why = await manager.explain(template, messages, 'session-1', template.tools);
for (const { tool, allowed, reason } of why.tools) {
  console.log(`${tool}: ${allowed ? 'allowed' : `blocked (${reason?.code}: ${reason?.message})`}`);
}
