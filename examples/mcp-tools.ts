/**
 * MCP tools under Baton's policy inside your own AI SDK loop: `mcpTools()` from
 * `baton-agents/mcp` takes the tools of an `@ai-sdk/mcp` client (here the MCP reference server
 * `@modelcontextprotocol/server-everything`, spawned over stdio), names them by server, keeps only
 * what the template lists, and hands their annotations to `orchestrate()`, so that the step's
 * `@readOnly` judges them. The model is a scripted one that tries a hidden tool, a tool that is
 * not read-only, a denied one, one out of sequence and a call a rule refuses: none of them
 * reaches the server. No network, no API key:
 * `npm run example -- examples/mcp-tools.ts` in a clone.
 */
import { fileURLToPath } from 'node:url';
import { createMCPClient } from '@ai-sdk/mcp';
import { StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { generateText, isStepCount } from 'ai';
import { createOrchestrationManager } from 'baton-agents';
import { orchestrate } from 'baton-agents/ai-sdk';
import { mcpTools } from 'baton-agents/mcp';
import { ScriptedModel } from 'baton-agents/testing';

const template = {
  id: 'mcp-reader',
  // The server's tools this agent may use at all; the others are hidden (never offered, never run).
  tools: ['everything__echo', 'everything__get-*', 'everything__toggle-*'],
  orchestration: {
    steps: [
      {
        name: 'Read',
        isDefault: true,
        // Read-only tools only, judged by what each tool declares; never get-env.
        availableTools: { allowed: ['@readOnly'], denied: ['everything__get-env'] },
        sequence: ['everything__echo', 'everything__get-sum'],
      },
    ],
    rules: [
      {
        tools: ['everything__echo'],
        when: "args.message.contains('password')",
        effect: 'deny' as const,
        reason: 'Never repeat a password',
      },
    ],
  },
};

// In an app: new StdioMCPTransport({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] })
const server = fileURLToPath(import.meta.resolve('@modelcontextprotocol/server-everything/dist/index.js'));
const everything = await createMCPClient({
  transport: new StdioMCPTransport({ command: process.execPath, args: [server, 'stdio'] }),
});
try {
  const mcp = await mcpTools({ everything }, { template });
  console.log(`kept ${Object.keys(mcp.tools).join(', ')}`);

  const manager = createOrchestrationManager();
  const messages = [{ role: 'user' as const, content: 'Say hello, then add 2 and 3.' }];
  // A model that misbehaves on purpose (any AI SDK model goes here).
  const model = new ScriptedModel([
    {
      toolCalls: [
        { toolName: 'everything__gzip-file-as-resource', input: {} }, // hidden by the template
        { toolName: 'everything__toggle-simulated-logging', input: {} }, // not read-only
        { toolName: 'everything__get-env', input: {} }, // denied by the step
        { toolName: 'everything__get-sum', input: { a: 1, b: 1 } }, // out of sequence
      ],
    },
    { toolCalls: [{ toolName: 'everything__echo', input: { message: 'hello, my password is hunter2' } }] }, // a rule
    { toolCalls: [{ toolName: 'everything__echo', input: { message: 'hello' } }] },
    { toolCalls: [{ toolName: 'everything__get-sum', input: { a: 2, b: 3 } }] },
    { text: 'Said hello; 2 + 3 = 5.' },
  ]);
  const orchestration = orchestrate({
    manager,
    config: template,
    sessionId: 'mcp-example',
    messages,
    ...mcp, // tools and toolAnnotations
    onStep: (step) => console.log(`step ${step.stepNumber}: offered ${step.allowedTools.join(', ') || '(none)'}`),
  });
  const result = await generateText({ model, messages, stopWhen: isStepCount(8), ...orchestration });
  await orchestration.settled();
  // Refusals come in two shapes: scan for both.
  for (const part of result.steps.flatMap((step) => step.content)) {
    if (part.type === 'tool-result') console.log(`  ran ${part.toolName}: ${JSON.stringify(part.output)}`);
    // A tool the step does not offer (or no tool of that name): the AI SDK refuses the call
    // itself, before any hook, as a tool error.
    if (part.type === 'tool-error') console.log(`  refused ${part.toolName}: ${String(part.error).split('.')[0]}`);
    // A call of an offered tool that the orchestration refuses (a rule, a limit, the sequence):
    // an automatic denial through the approval hook, with the reason; no tool-error.
    if (part.type === 'tool-approval-response' && !part.approved) {
      console.log(`  denied ${part.toolCall.toolName}: ${part.reason}`);
    }
  }
  console.log(result.text);

  // Why, per tool: the selector or name that allowed or denied it (the plan judges by the annotations).
  const plan = manager.plan(template, mcp.toolAnnotations);
  const explained = await manager.explain(plan, messages, 'mcp-example', Object.keys(mcp.tools));
  for (const tool of explained.tools) {
    console.log(`${tool.tool}: ${tool.allowed ? `allowed by ${tool.allowedBy}` : tool.reason?.message}`);
  }
} finally {
  await everything.close();
}
