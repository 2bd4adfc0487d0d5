/**
 * Baton and OPA guarding one agent, both restrictions winning. Baton keeps the conversation's
 * rules (a payment over 1000 is refused, one payment per question); OPA, through the AI SDK's
 * `@ai-sdk/policy-opa`, keeps the security team's policy (`examples/opa/agent.rego`: blocked
 * payees). OPA's `toolApproval` goes into `orchestrate()`, which asks it only about calls Baton
 * allows: a call either of them refuses is not run, and the model reads why.
 *
 * Start OPA with the policy, then run the example (its model is scripted, so no API key):
 *
 *   opa run --server --addr localhost:8181 examples/opa/agent.rego examples/opa/data.json
 *   OPA_URL=http://localhost:8181 npm run example examples/opa-composition.ts
 */

import { httpPolicyClient, opaPolicy } from '@ai-sdk/policy-opa';
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { generateText, isStepCount, type ModelMessage, type ToolApprovalConfiguration, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { createOrchestrationManager, type OrchestrationManager, type OrchestrationSource } from 'baton-agents';
import { orchestrate } from 'baton-agents/ai-sdk';
import { z } from 'zod';

/** Baton's template: the rules of this conversation. */
export const template: OrchestrationSource = {
  orchestration: {
    rules: [
      { tools: ['pay'], when: 'args.amount > 1000', effect: 'deny', reason: 'Payments over 1000 need finance' },
      { tools: ['pay'], limit: { max: 1, per: 'turn' }, reason: 'One payment per question' },
    ],
    steps: [{ name: 'Billing', isDefault: true }],
  },
};

/** Options of {@link payTurn}. */
export interface PayTurnOptions {
  manager: OrchestrationManager;
  /** Where OPA's REST API answers (e.g. `http://localhost:8181`). */
  opaUrl: string;
  model: LanguageModelV4;
  sessionId: string;
  /** Called when a payment really runs. */
  onPay: (payment: { to: string; amount: number }) => void;
}

/** One turn of the billing agent, guarded by Baton and by OPA. */
export async function payTurn({ manager, opaUrl, model, sessionId, onPay }: PayTurnOptions) {
  const tools = {
    pay: tool({
      description: 'Pays an invoice',
      inputSchema: z.object({ to: z.string(), amount: z.number() }),
      execute: async (payment) => {
        onPay(payment);
        return `paid ${payment.amount} to ${payment.to}`;
      },
    }),
  };
  const messages: ModelMessage[] = [{ role: 'user', content: 'Pay the open invoices' }];
  const orchestration = orchestrate({
    manager,
    config: template,
    sessionId,
    tools,
    messages,
    // OPA's decision, asked only for calls Baton allows. It fails closed: an OPA that does not
    // answer denies the call. (The cast: @ai-sdk/policy-opa 1.0 is typed against an earlier
    // `ai` 7 release, whose tool types TypeScript tells apart from the current ones.)
    toolApproval: opaPolicy({
      client: httpPolicyClient({ url: opaUrl }),
      path: 'agent/call/decision',
    }) as ToolApprovalConfiguration<typeof tools, Record<string, unknown>>,
  });
  const result = await generateText({ model, messages, stopWhen: isStepCount(8), ...orchestration });
  await orchestration.settled();
  return result;
}

/**
 * A stand-in for a model: it tries one payment per step (a blocked payee, too much, a fine one,
 * one more), while paying is offered, then answers.
 */
export function scriptedModel(): LanguageModelV4 {
  const payments = [
    { to: 'mallory', amount: 50 },
    { to: 'acme', amount: 5000 },
    { to: 'acme', amount: 50 },
    { to: 'globex', amount: 20 },
  ];
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt, tools }) => {
      const step = prompt.filter((message) => message.role === 'assistant').length;
      // Like a real model, it calls only a tool it is offered.
      const offered = tools?.some((tool) => tool.name === 'pay') === true;
      const payment = offered ? payments[step] : undefined;
      const usage = {
        inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 5, text: 5, reasoning: undefined },
      };
      if (payment === undefined) {
        return {
          content: [{ type: 'text', text: offered ? 'Done.' : 'Paying is not offered now: done.' }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: 'tool-call', toolCallId: `pay-${step}`, toolName: 'pay', input: JSON.stringify(payment) }],
        finishReason: { unified: 'tool-calls', raw: 'tool-calls' },
        usage,
        warnings: [],
      };
    },
  });
}

if (import.meta.main) {
  const opaUrl = process.env.OPA_URL;
  if (opaUrl === undefined) {
    console.error('Set OPA_URL to a running OPA with examples/opa/agent.rego (see the comment at the top).');
    process.exit(1);
  }
  const result = await payTurn({
    manager: createOrchestrationManager(),
    opaUrl,
    model: scriptedModel(),
    sessionId: 'billing',
    onPay: (payment) => console.log(`PAID ${payment.amount} to ${payment.to}`),
  });
  console.log(result.text);
  for (const part of result.steps.flatMap((step) => step.content)) {
    if (part.type === 'tool-approval-response' && !part.approved) {
      console.log(`refused ${part.toolCall.toolCallId}: ${part.reason}`);
    }
  }
}
