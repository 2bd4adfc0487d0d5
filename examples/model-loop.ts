/**
 * The README's model loop, runnable with no network and no API key: `orchestrate()` inside an
 * AI SDK `streamText` tool loop, driving the offline model with the built-in tools. Before every
 * model step it offers only the tools the template allows, so the sequence search -> think ->
 * reflect advances within one turn. `npm run example examples/model-loop.ts` in a clone, or
 * `npx tsx node_modules/baton-agents/examples/model-loop.ts` in an app that installed the package.
 */
import { fileURLToPath } from 'node:url';
import { isStepCount, streamText } from 'ai';
import { createOrchestrationManager, loadTemplate } from 'baton-agents';
import { builtinTools } from 'baton-agents/agents';
import { createOfflineModel, orchestrate } from 'baton-agents/ai-sdk';

const template = await loadTemplate(fileURLToPath(new URL('./agents/cognitive-reasoner.json', import.meta.url)));
const manager = createOrchestrationManager();
const model = createOfflineModel(); // or createLLM({ provider: 'openai', model: 'gpt-4o' }).model, ...
const messages = [{ role: 'user' as const, content: 'How many electric vehicles will be on the road by 2030?' }];

const orchestration = orchestrate({
  manager,
  config: template,
  sessionId: 'model-loop',
  tools: builtinTools,
  messages,
  onStep: (step) => console.log(`step ${step.activeStep ?? '(none)'}: offered ${step.allowedTools.join(', ')}`),
});
const result = streamText({ model, messages, stopWhen: isStepCount(10), ...orchestration });
for await (const part of result.fullStream) {
  if (part.type === 'tool-call') console.log(`  called ${part.toolName}`);
}
await orchestration.settled();
console.log(`\n${(await result.text).split('\n')[0]}`);
