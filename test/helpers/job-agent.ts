/**
 * An agent with one tool, `job`, that each turn calls once and then answers: for tests of what a
 * server does while a tool runs (a client leaving, a session deleted meanwhile). The tool's
 * `execute` is the test's own.
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { tool } from 'ai';
import { z } from 'zod';
import type { AgentTemplate } from '../../src/core/schema.js';
import { validateTemplate } from '../../src/core/validate-template.js';
import { mockModel } from './mock-model.js';

const parsed = validateTemplate({
  id: 'worker',
  name: 'Worker',
  description: 'Runs one job per turn',
  tools: ['job'],
  orchestration: { steps: [{ name: 'Work', isDefault: true, availableTools: { allowed: ['job'] } }] },
});
if (!parsed.success) throw new Error(JSON.stringify(parsed.issues));

/** The `worker` agent: its one step allows `job`. */
export const JOB_AGENT: AgentTemplate = parsed.template;

/** The agent's tools, with `run` as the job. */
export function jobTools(run: () => Promise<string>) {
  return { job: tool({ inputSchema: z.object({}), execute: run }) };
}

/** A model that calls `job` first in each turn, then answers once its result is in. */
export function jobModel(): LanguageModelV4 {
  return mockModel((call) =>
    call.options.prompt.at(-1)?.role === 'tool' ? { text: 'Done.' } : { calls: [{ tool: 'job' }] },
  ).model;
}
