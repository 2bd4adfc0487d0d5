/**
 * `npm run demo`: loads the cognitive-reasoner template and plays a short conversation through
 * the orchestration manager, printing the active step and the allowed tools before every
 * tool call. No model and no network: the "model" here is a script, so the output shows the
 * orchestration itself.
 */
import { styleText } from 'node:util';
import { createOrchestrationManager, loadTemplate, type OrchestrationEvent } from 'baton-agents';
import { createAgent } from 'baton-agents/agents';

const color = (format: Parameters<typeof styleText>[0], text: string) =>
  process.stdout.isTTY ? styleText(format, text) : text;

const template = await loadTemplate(new URL('./agents/cognitive-reasoner.json', import.meta.url).pathname);
const events: OrchestrationEvent[] = [];
const manager = createOrchestrationManager({ onEvent: (event) => events.push(event) });
const sessionId = 'demo';

/** What the scripted model tries to call in each turn, in order. */
const script: { user: string; calls: string[] }[] = [
  { user: 'Critique the argument that remote work improves productivity.', calls: ['critique', 'debate', 'reflect'] },
  {
    user: 'Now evaluate the counter-arguments, and search for data first.',
    calls: ['search', 'critique', 'debate', 'reflect'],
  },
  { user: 'Thanks! Anything else worth comparing?', calls: ['compare'] },
];

console.log(color('bold', `Agent: ${template.name} (${template.id})`));
console.log(`Tools: ${template.tools.join(', ')}`);
console.log(`Steps: ${template.orchestration?.steps.map((s) => s.name).join(', ')}\n`);

const messages: { role: string; content: string }[] = [];
for (const [turn, { user, calls }] of script.entries()) {
  messages.push({ role: 'user', content: user });
  console.log(color('cyan', `Turn ${turn + 1}, user: "${user}"`));
  for (const tool of calls) {
    const allowed = await manager.getAllowedTools(template, messages, sessionId, template.tools);
    const state = await manager.getState(sessionId);
    const step = template.orchestration?.steps.find((s) => s.name === state?.activeStep);
    const progress = step?.sequence ? ` [sequence ${state?.sequenceIndex}/${step.sequence.length}]` : '';
    console.log(
      `  step ${color('bold', state?.activeStep ?? '(none)')}${progress}  allowed: ${allowed.join(', ') || '(none)'}`,
    );
    // What a model loop does with each call: ask first (a refused call is never run), then
    // record the call as completed once the tool has run.
    const toolCallId = `turn-${turn}-${tool}`;
    const call = { tool, toolCallId, agentTools: template.tools };
    const decision = await manager.requestTool(template, messages, sessionId, call);
    if (!decision.allowed) {
      console.log(`    ${color('red', `✗ ${tool} rejected`)}: ${decision.reason.message}`);
      continue;
    }
    events.length = 0;
    await manager.completeTool(template, messages, sessionId, toolCallId);
    const notes = events.map(describe).filter(Boolean).join('; ');
    console.log(`    ${color('green', `✓ ${tool}`)}${notes ? `  (${notes})` : ''}`);
  }
  messages.push({ role: 'assistant', content: '(answer)' });
}

const final = await manager.getState(sessionId);
console.log(`\nrecentlyUsedTools (oldest first): ${final?.recentlyUsedTools.join(' → ')}`);

// Part two: the same template as a running agent, with the offline model (no network, no key)
// inside a real AI SDK tool loop. Before every model step the orchestration picks the tools.
const question = 'How many electric vehicles will be on the road by 2030?';
console.log(color('bold', `\nAgent with the offline model, user: "${question}"`));
const agent = createAgent(template, { model: 'offline' });
const result = await agent.handleMessage({
  sessionId: 'demo-agent',
  messages: [{ role: 'user', content: question }],
  onStep: (step) => {
    const seq = step.sequence;
    const progress = seq ? ` [${seq.completed ? 'done' : `${seq.index + 1}/${seq.length}`}]` : '';
    console.log(
      `  step ${color('bold', step.activeStep ?? '(none)')}${progress}  offered: ${step.allowedTools.join(', ') || '(none)'}`,
    );
  },
});
for await (const part of result.stream) {
  if (part.type === 'tool-call') console.log(`    ${color('green', `→ ${part.toolName}`)}`);
}
console.log(`\n${(await result.text).split('\n').slice(0, 3).join('\n')} …`);
console.log(`\nTry it yourself: npm run chat`);

function describe(event: OrchestrationEvent): string {
  switch (event.type) {
    case 'step-changed':
      return `step ${event.from ?? '(none)'} → ${event.to ?? '(none)'}`;
    case 'sequence-advanced':
      return `sequence ${event.index}/${event.length}`;
    case 'sequence-completed':
      return 'sequence complete';
    default:
      return '';
  }
}
