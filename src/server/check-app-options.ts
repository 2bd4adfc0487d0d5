/**
 * `createApp`'s options, checked when the app is created: its own options, every agent's
 * template, agent ids, and what this process needs for the store it names. Configuration
 * problems come as one `TemplateConfigError` listing them all with their paths
 * (`agents[1].orchestration.rulez`, `maxTurns`); a store this Node.js or this app cannot run
 * throws its own error (`UnsupportedRuntimeError`, `MissingDependencyError`) saying what to do.
 * Either way the app never starts to answer its first request with a 500.
 */
import { z } from 'zod/v4';
import { checkAgentTemplate } from '../agents/create-agent.js';
import { modelOptionSchema } from '../ai-sdk/check-orchestrate-options.js';
import { toolApprovalKeyBytes } from '../ai-sdk/tool-approval-secret.js';
import { InvalidArgumentError } from '../core/errors.js';
import {
  functionSchema,
  managerSchema,
  objectSchema,
  optionIssues,
  prefixIssues,
  storeSchema,
  templateObjectSchema,
  throwOnErrors,
  toolsSchema,
} from '../core/option-issues.js';
import { isCompiledPolicy } from '../core/policy.js';
import { type TemplateIssue, TemplateIssueCode } from '../core/template-issues.js';
import { checkStoreRuntime, storeUrlProblem } from '../stores/resolve-store.js';
import type { CreateAppOptions } from './create-app.js';

const wholeNumber = (min: number) => z.number().int(`expected a whole number >= ${min}`).min(min);

/** One schema per option: a new option of `CreateAppOptions` does not compile until it is checked here. */
const optionSchemas: { [K in keyof Required<CreateAppOptions>]: z.ZodType } = {
  agents: z.array(templateObjectSchema('expected an agent template or { template, warnings?, model? }')),
  manager: managerSchema,
  store: storeSchema,
  eventLog: wholeNumber(0),
  leaseMs: wholeNumber(1),
  // Its rules are checked where it is compiled (createOrchestrationManager), every issue at once.
  policy: z.union([
    z.custom(isCompiledPolicy),
    z.object({ rules: z.array(z.unknown()) }, 'expected a policy ({ rules: [...] })').loose(),
  ]),
  // Each key's length is checked by the key ring's own rule, below (one rule, one message).
  approvalKeys: z
    .array(z.union([z.string(), z.instanceof(Uint8Array)], 'expected a string or a Uint8Array'))
    .min(1, 'expected at least one approval key (the first one signs)'),
  stateless: z.strictObject({
    keys: z.array(z.string()).min(1, 'stateless mode needs at least one signing key'),
    ttl: wholeNumber(1).optional(),
    replayStore: z.union([storeSchema, z.literal(false)]).optional(),
    onEvent: functionSchema.optional(),
  }),
  model: modelOptionSchema,
  telemetry: z.strictObject({
    tracer: objectSchema('expected an OpenTelemetry tracer').optional(),
    recordContent: z.boolean().optional(),
  }),
  tools: toolsSchema,
  // Not z.record: process.env is not a plain object.
  env: objectSchema('expected an environment such as process.env'),
  apiKey: z.string().min(1, 'expected a non-empty key'),
  corsOrigins: z.array(z.string()),
  bodyLimit: wholeNumber(1),
  maxMessages: wholeNumber(1),
  maxMessageChars: wholeNumber(1),
  maxTurns: wholeNumber(1),
  minTurns: wholeNumber(1),
  maxQueuedTurns: wholeNumber(0),
  logger: z.custom<object>(
    (value) =>
      typeof value === 'object' && value !== null && typeof (value as { error?: unknown }).error === 'function',
    'expected a pino logger',
  ),
  webRoot: z.union([z.string(), z.literal(false)]),
};

const createAppSchema = z
  .strictObject(
    Object.fromEntries(
      Object.entries(optionSchemas).map(([key, schema]) => [key, key === 'agents' ? schema : schema.optional()]),
    ),
  )
  .refine(
    (options) =>
      typeof options.minTurns !== 'number' ||
      typeof options.maxTurns !== 'number' ||
      options.minTurns <= options.maxTurns,
    { message: 'expected minTurns <= maxTurns', path: ['minTurns'] },
  );

const servedAgentSchema = z.strictObject({
  template: templateObjectSchema('expected an agent template'),
  warnings: z.array(objectSchema('expected a template issue')).optional(),
  model: modelOptionSchema.optional(),
});

/** Throws when `options` cannot make a working app; see the module comment. */
export function assertCreateAppOptions(options: CreateAppOptions): void {
  if (typeof options !== 'object' || options === null) {
    throwOnErrors(
      [{ code: TemplateIssueCode.InvalidType, severity: 'error', path: 'options', message: 'expected an object' }],
      'createApp options',
    );
  }
  const issues: TemplateIssue[] = optionIssues(createAppSchema, options);
  const ids = new Map<string, number>();
  for (const [i, entry] of (Array.isArray(options.agents) ? options.agents : []).entries()) {
    // Not an object, or a Promise (a loadTemplate() without await): reported by the schema.
    if (typeof entry !== 'object' || entry === null || typeof (entry as { then?: unknown }).then === 'function')
      continue;
    // A template always has a string id; a ServedAgent wraps one under `template`.
    const served = typeof (entry as { id?: unknown }).id !== 'string' && 'template' in entry;
    const at = served ? `agents[${i}].template` : `agents[${i}]`;
    if (served) issues.push(...optionIssues(servedAgentSchema, entry, ['agents', i]));
    const template: unknown = served ? (entry as { template: unknown }).template : entry;
    if (
      typeof template !== 'object' ||
      template === null ||
      typeof (template as { then?: unknown }).then === 'function'
    )
      continue;
    issues.push(...prefixIssues(checkAgentTemplate(template), at));
    const id = (template as { id?: unknown }).id;
    if (typeof id !== 'string') continue;
    const first = ids.get(id);
    if (first === undefined) ids.set(id, i);
    else {
      issues.push({
        code: TemplateIssueCode.DuplicateId,
        severity: 'error',
        path: `${at}.id`,
        message: `two agents have the id "${id}" (agents[${first}] and agents[${i}]); agent ids name their routes and sessions, so they must be unique`,
      });
    }
  }
  // Keys: at least 32 bytes each, checked as the app will check them when it uses them.
  const keyRings: [string, unknown][] = [
    ['approvalKeys', options.approvalKeys],
    ['stateless.keys', options.stateless?.keys],
  ];
  for (const [path, keys] of keyRings) {
    if (!Array.isArray(keys)) continue;
    for (const [i, key] of keys.entries()) {
      try {
        toolApprovalKeyBytes(key as string | Uint8Array, `${path}[${i}]`);
      } catch (error) {
        if (!InvalidArgumentError.isInstance(error)) throw error;
        const message = error.message.replace(`Invalid ${error.path}: `, '');
        issues.push({ code: TemplateIssueCode.InvalidValue, severity: 'error', path: error.path, message });
      }
    }
  }
  const stores: [string, unknown][] = [
    // The app opens `store` only without a manager of its own, and never in stateless mode.
    ['store', options.manager === undefined && options.stateless === undefined ? options.store : undefined],
    ['stateless.replayStore', options.stateless?.replayStore],
  ];
  for (const [path, spec] of stores) {
    if (typeof spec !== 'string') continue;
    const problem = storeUrlProblem(spec);
    if (problem !== undefined) {
      issues.push({ code: TemplateIssueCode.InvalidValue, severity: 'error', path, message: problem });
    }
  }
  throwOnErrors(issues, 'createApp options');
  for (const [, spec] of stores) if (typeof spec === 'string') checkStoreRuntime(spec);
}
