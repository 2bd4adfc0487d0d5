/**
 * The options of `orchestrate()` and `OrchestratedAgent`, checked when they are created: their
 * shapes and the template (or orchestration block). Every problem comes in one
 * `TemplateConfigError`, with its path. It runs for every turn, so it only does what costs
 * microseconds: the config's plan is compiled once per config object.
 */
import type { ToolSet } from 'ai';
import { z } from 'zod/v4';
import type { OrchestrationSource } from '../core/compile.js';
import {
  functionSchema,
  managerSchema,
  objectSchema,
  optionIssues,
  prefixIssues,
  templateObjectSchema,
  throwOnErrors,
  toolsSchema,
} from '../core/option-issues.js';
import { MAX_SESSION_ID_LENGTH } from '../core/state-check.js';
import { TemplateConfigError, type TemplateIssue } from '../core/template-issues.js';
import type { ToolAnnotations } from '../core/tool-annotations.js';
import { misspeltOrchestrationIssues } from '../core/validate-template.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { ruleConditionIssues } from './check-rule-conditions.js';
import { CoreLLM } from './core-llm.js';
import type { OrchestrateOptions } from './orchestrate.js';

const isObject = (value: unknown): value is object => typeof value === 'object' && value !== null;

const isObjectLike = (value: unknown): value is Record<string, unknown> =>
  (typeof value === 'object' && value !== null) || typeof value === 'function';

/**
 * What is wrong with a `model` option, or undefined when the agent can use it: a spec
 * (`offline`, `openai:gpt-4o`, checked by `createLLM` when the agent is made), an AI SDK
 * language model, a `CoreLLM`, or `{ provider, model }`. Anything else would only fail when the
 * first chat request calls the model, as a 500.
 */
function modelProblem(value: unknown): string | undefined {
  if (typeof value === 'string' || value instanceof CoreLLM) return undefined;
  const expected =
    'expected a model spec ("offline", "openai:gpt-4o"), an AI SDK language model (openai("gpt-4o")), a CoreLLM or { provider, model }';
  if (!isObjectLike(value)) return `${expected}, got ${value === null ? 'null' : typeof value}`;
  if (typeof value.doStream === 'function' && typeof value.doGenerate === 'function') return undefined;
  if (typeof value.languageModel === 'function') {
    return `${expected}; this is a provider: call it with a model id (openai("gpt-4o"))`;
  }
  if (typeof value.provider === 'string' && !('specificationVersion' in value)) return undefined;
  return `${expected}, got an object with neither doStream nor provider`;
}

/** The `model` option of `createApp` (and its agents): see {@link modelProblem}. */
export const modelOptionSchema = z.unknown().superRefine((value, ctx) => {
  const problem = modelProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

/** One schema per option: a new option of `orchestrate()` does not compile until it is checked here. */
export const orchestrateOptionSchemas: { [K in keyof Required<OrchestrateOptions<ToolSet>>]: z.ZodType } = {
  manager: managerSchema,
  config: templateObjectSchema('expected an agent template or its orchestration block'),
  sessionId: z
    .string()
    .min(1, 'the session id is empty; pass a non-empty string')
    .max(MAX_SESSION_ID_LENGTH, `expected at most ${MAX_SESSION_ID_LENGTH} characters`),
  tools: toolsSchema,
  toolAnnotations: z.custom<ReadonlyMap<string, unknown>>(
    (value) => value instanceof Map,
    'expected a Map from tool name to MCP annotations (mcpTools() returns one)',
  ),
  messages: z.array(objectSchema('expected a message')),
  agentId: z.string().min(1, 'expected a non-empty agent id'),
  sessionState: objectSchema('expected an orchestration state'),
  newSession: z.boolean(),
  context: objectSchema('expected an object of facts for rules'),
  turnId: z.string().min(1, 'expected a non-empty turn id'),
  onStep: functionSchema,
  onError: functionSchema,
  instructions: z.unknown(),
  activeTools: z.array(z.string()),
  toolChoice: z.unknown(),
  prepareStep: functionSchema,
  toolApproval: z.union([functionSchema, objectSchema('expected a function or per-tool statuses')]),
  onStepEnd: functionSchema,
  onEnd: functionSchema,
};

/** True for an array whose every item passes `test`, holes of a sparse array included (as zod reads them). */
function everyItem(value: unknown, test: (item: unknown) => boolean): boolean {
  if (!Array.isArray(value)) return false;
  for (let i = 0; i < value.length; i++) if (!test(value[i])) return false;
  return true;
}

const isNonEmptyString = (value: unknown) => typeof value === 'string' && value.length > 0;

/**
 * For the options that are not objects (strings, arrays, booleans), and so are checked every
 * turn: a test that accepts exactly what the option's schema accepts, without zod's parse. Every
 * turn passes them, and a parse is most of the check's cost. A value it refuses goes to the
 * schema, which says what is wrong; a test checks that both agree on any value.
 */
export const quickOptionChecks: Partial<Record<keyof typeof orchestrateOptionSchemas, (value: unknown) => boolean>> = {
  sessionId: (value) => isNonEmptyString(value) && (value as string).length <= MAX_SESSION_ID_LENGTH,
  agentId: isNonEmptyString,
  turnId: isNonEmptyString,
  newSession: (value) => typeof value === 'boolean',
  messages: (value) => everyItem(value, isObject),
  activeTools: (value) => everyItem(value, (tool) => typeof tool === 'string'),
  instructions: () => true,
  toolChoice: () => true,
};

const orchestrateOptionsSchema = z.strictObject(
  Object.fromEntries(
    Object.entries(orchestrateOptionSchemas).map(([key, schema]) => [
      key,
      ['manager', 'config', 'sessionId', 'tools'].includes(key) ? schema : schema.optional(),
    ]),
  ),
);

const optionKeys = Object.keys(orchestrateOptionSchemas) as (keyof typeof orchestrateOptionSchemas)[];
const requiredKeys = new Set<string>(['manager', 'config', 'sessionId', 'tools']);

/**
 * Option values (objects and functions) that passed their option's schema before, with the
 * options they passed as. `orchestrate()` runs every turn, mostly with the same manager, config,
 * tools and callbacks: each is checked once per object (as the manager compiles a config once
 * per object), and a turn checks only what is new. Arrays (messages, activeTools) are checked
 * every time: an app appends to its message array between turns.
 */
const passed = new WeakMap<object, Set<string>>();

const isCacheable = (value: unknown): value is object =>
  typeof value === 'function' || (typeof value === 'object' && value !== null && !Array.isArray(value));

/**
 * True when every option is known and passes its schema, its objects and functions by an
 * earlier check of the same object (zod, or a quick test that agrees with it, decides every verdict;
 * this only remembers them).
 */
function passedBefore(options: Readonly<Record<string, unknown>>): boolean {
  // Only the keys the options have (a handful of the twenty an app may pass).
  let required = 0;
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(orchestrateOptionSchemas, key)) return false;
    const value = options[key];
    if (value === undefined) continue;
    if (requiredKeys.has(key)) required++;
    if (isCacheable(value)) {
      if (passed.get(value)?.has(key) !== true) return false;
    } else {
      const name = key as keyof typeof orchestrateOptionSchemas;
      const quick = quickOptionChecks[name];
      if (!(quick === undefined ? orchestrateOptionSchemas[name].safeParse(value).success : quick(value))) return false;
    }
  }
  return required === requiredKeys.size;
}

/** Remembers the objects and functions of options that passed (see {@link passed}). */
function rememberPassed(options: Readonly<Record<string, unknown>>): void {
  for (const key of optionKeys) {
    const value = options[key];
    if (!isCacheable(value)) continue;
    const keys = passed.get(value);
    if (keys === undefined) passed.set(value, new Set([key]));
    else keys.add(key);
  }
}

/** Throws one `TemplateConfigError` listing every problem of `orchestrate()`'s options. */
export function assertOrchestrateOptions(options: unknown): void {
  const known = isObject(options) && passedBefore(options as Readonly<Record<string, unknown>>);
  const issues = known ? [] : optionIssues(orchestrateOptionsSchema, options);
  if (isObject(options)) {
    const { manager, config, tools, toolAnnotations } = options as Partial<
      Record<'manager' | 'config' | 'tools' | 'toolAnnotations', unknown>
    >;
    const annotations =
      toolAnnotations instanceof Map ? (toolAnnotations as ReadonlyMap<string, ToolAnnotations>) : undefined;
    // Checked every time: whether a config suits the tools depends on both (the plan is cached,
    // and so is each tools object that suited it).
    issues.push(...configIssues(manager, config, tools, annotations));
  }
  throwOnErrors(issues, 'orchestrate() options');
  if (!known) rememberPassed(options as Readonly<Record<string, unknown>>);
}

const orchestratedAgentSchema = z.looseObject({
  manager: managerSchema,
  config: templateObjectSchema('expected an agent template or its orchestration block'),
  tools: toolsSchema,
  onOrchestrationError: functionSchema.optional(),
});

/**
 * Throws one `TemplateConfigError` listing every problem of an `OrchestratedAgent`'s own
 * settings (its manager, config and tools; the AI SDK checks the rest).
 */
export function assertOrchestratedAgentSettings(settings: unknown): void {
  const issues = optionIssues(orchestratedAgentSchema, settings);
  if (isObject(settings)) {
    const { manager, config, tools, toolAnnotations } = settings as Partial<
      Record<'manager' | 'config' | 'tools' | 'toolAnnotations', unknown>
    >;
    const annotations =
      toolAnnotations instanceof Map ? (toolAnnotations as ReadonlyMap<string, ToolAnnotations>) : undefined;
    issues.push(...configIssues(manager, config, tools, annotations));
  }
  throwOnErrors(issues, 'OrchestratedAgent settings');
}

/**
 * The tools objects whose input schemas a plan's rule conditions were checked against and
 * suited, per plan (a plan stands for its manager, config and annotations): `orchestrate()` runs
 * every turn with the same ones, and each is checked once, as each option object is.
 */
const suitedTools = new WeakMap<object, WeakSet<object>>();

/** Configs whose top-level keys were checked for a misspelt `orchestration` (once per object). */
const wellSpelt = new WeakSet<object>();

/**
 * The problems of a config as the manager compiles it (cached per config object), and of its
 * rule conditions against the input schemas of `tools` when they are given, prefixed `config`.
 */
export function configIssues(
  manager: unknown,
  config: unknown,
  tools?: unknown,
  toolAnnotations?: ReadonlyMap<string, ToolAnnotations>,
): TemplateIssue[] {
  // A manager that passed the options check before is not parsed again (it is every turn's).
  const checked = isObject(manager) && passed.get(manager)?.has('manager') === true;
  if (!(checked || managerSchema.safeParse(manager).success) || !isObject(config)) return [];
  if (!wellSpelt.has(config)) {
    const misspelt = misspeltOrchestrationIssues(config);
    if (misspelt.length > 0) return prefixIssues(misspelt, 'config');
    wellSpelt.add(config);
  }
  try {
    const plan = (manager as OrchestrationManager).plan(config as OrchestrationSource, toolAnnotations);
    if (!isObject(tools)) return [];
    if (suitedTools.get(plan)?.has(tools) === true) return [];
    const base = 'orchestration' in config ? 'orchestration' : '';
    const issues = prefixIssues([...ruleConditionIssues(plan, tools as ToolSet, base)], 'config');
    if (issues.length === 0) {
      const suited = suitedTools.get(plan) ?? new WeakSet<object>();
      suitedTools.set(plan, suited);
      suited.add(tools);
    }
    return issues;
  } catch (error) {
    if (!TemplateConfigError.isInstance(error)) throw error;
    return prefixIssues(
      error.issues.filter((issue) => issue.severity === 'error'),
      'config',
    );
  }
}
