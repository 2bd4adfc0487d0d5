/**
 * The agents a server serves: each built once with its model and tools, with the summary and
 * detail the agent routes answer, and how to explain a session of it.
 */
import type { ToolSet } from 'ai';
import {
  type Agent,
  type AgentTelemetryOptions,
  type CreateAgentOptions,
  createAgent,
} from '../agents/create-agent.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import type { OrchestrationState } from '../core/state.js';
import { templateGraph, toMermaid } from '../core/template-graph.js';
import type { TemplateIssue } from '../core/template-issues.js';
import type { Explanation } from '../core/transition.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import type { AgentDetailResponse, AgentSummary, StepSummary } from './api-types.js';
import { HttpError } from './http-errors.js';

/** An agent to serve: its template, and optionally the warnings it loaded with and its own model. */
export interface ServedAgent {
  template: AgentTemplate;
  /** Validation warnings, shown by `GET /api/agents/:agentId`. */
  warnings?: readonly TemplateIssue[];
  /** This agent's model; default the app's `model`, else the template's. */
  model?: CreateAgentOptions['model'];
}

/** A served agent, built. */
export interface Served {
  agent: Agent;
  /** The names of the agent's tools. */
  toolNames: ReadonlySet<string>;
  summary: AgentSummary;
  detail: AgentDetailResponse;
}

/** The served agents by id. */
export interface ServedAgents {
  /** Every agent, in the order given. */
  readonly all: readonly Served[];
  /** The agent, or undefined. */
  find(agentId: string): Served | undefined;
  /** The agent named in a request path; a 404 naming the agents there are otherwise. */
  get(agentId: string): Served;
}

/** What the agents share: the model, tool implementations, API keys and telemetry settings. */
export interface BuildAgentsOptions {
  model?: CreateAgentOptions['model'];
  tools?: ToolSet;
  env?: Readonly<Record<string, string | undefined>>;
  /** What the agents' model calls record in the AI SDK's telemetry. */
  telemetry?: AgentTelemetryOptions;
}

/** Builds every agent on `manager`; two agents with one id are a configuration error. */
export function buildAgents(
  entries: readonly (AgentTemplate | ServedAgent)[],
  manager: OrchestrationManager,
  options: BuildAgentsOptions,
): ServedAgents {
  const byId = new Map<string, Served>();
  for (const entry of entries) {
    const served: ServedAgent = isServedAgent(entry) ? entry : { template: entry };
    const template = served.template;
    if (byId.has(template.id)) {
      throw new InvalidArgumentError('agents', `two agents have the id "${template.id}"`);
    }
    const model = served.model ?? options.model;
    const agent = createAgent(template, {
      manager,
      ...(model !== undefined ? { model } : {}),
      ...(options.tools ? { tools: options.tools } : {}),
      ...(options.env ? { env: options.env } : {}),
      ...(options.telemetry ? { telemetry: options.telemetry } : {}),
    });
    const summary = summarize(template);
    byId.set(template.id, {
      agent,
      toolNames: new Set(Object.keys(agent.tools)),
      summary,
      detail: {
        ...summary,
        template: structuredClone(template) as Record<string, unknown>,
        issues: [...(served.warnings ?? [])],
        stepDetails: stepDetails(template, summary.defaultStep),
        graph: templateGraph(template),
        mermaid: toMermaid(template),
      },
    });
  }
  const all = [...byId.values()];
  return {
    all,
    find: (agentId) => byId.get(agentId),
    get(agentId) {
      const served = byId.get(agentId);
      if (served) return served;
      const known = [...byId.keys()].join(', ') || 'none';
      throw new HttpError('unknown-agent', `No agent "${agentId}"; this server has: ${known}.`, {
        path: 'path.agentId',
      });
    },
  };
}

/**
 * Every tool allowed or why not, with what a model step would be offered, from a state already
 * read: what `manager.explain` answers (the decision's own judgement), without a second store read.
 */
export function explainState(manager: OrchestrationManager, served: Served, state: OrchestrationState): Explanation {
  return manager.explainState(served.agent.template, state, toolList(served));
}

/** The agent's tool names as one list per agent, so the plan's per-list caches are reused. */
const toolLists = new WeakMap<Served, readonly string[]>();

function toolList(served: Served): readonly string[] {
  let list = toolLists.get(served);
  if (list === undefined) {
    list = Object.freeze([...served.toolNames]);
    toolLists.set(served, list);
  }
  return list;
}

function summarize(template: AgentTemplate): AgentSummary {
  const steps = template.orchestration?.steps ?? [];
  return {
    id: template.id,
    name: template.name ?? template.id,
    description: template.description ?? '',
    tools: [...template.tools],
    steps: steps.map((step) => step.name),
    defaultStep: template.orchestration?.defaultStep ?? steps.find((step) => step.isDefault)?.name ?? null,
  };
}

function stepDetails(template: AgentTemplate, defaultStep: string | null): StepSummary[] {
  return (template.orchestration?.steps ?? []).map((step) => ({
    name: step.name,
    description: step.description ?? null,
    isDefault: step.isDefault === true || step.name === defaultStep,
    conditions: (step.conditions ?? []).map((condition) => ({ ...condition })),
    availableTools: step.availableTools
      ? { allowed: [...(step.availableTools.allowed ?? [])], denied: [...(step.availableTools.denied ?? [])] }
      : null,
    sequence: (step.sequence ?? []).map((position) => (Array.isArray(position) ? [...position] : [position])),
    resetSequenceOn: [...(step.resetSequenceOn ?? [])],
  }));
}

function isServedAgent(entry: AgentTemplate | ServedAgent): entry is ServedAgent {
  // A template always has a string id; a ServedAgent wraps one under `template`.
  return typeof (entry as { id?: unknown }).id !== 'string' && typeof entry.template === 'object';
}
