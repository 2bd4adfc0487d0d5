/**
 * The zod 4 schema of an agent template (SPEC section 1). It describes the structure; the
 * rules that span several fields (duplicate names, unknown tools, regexes) live in
 * `validate-template.ts`, which reports both kinds of problem together.
 */
import { z } from 'zod/v4';

const text = z.union([z.string(), z.array(z.string())]);

/** A condition of a step. `type` is a built-in type or one registered in code. */
export const stepConditionSchema = z
  .strictObject({
    type: z
      .string()
      .min(1)
      .describe(
        'tool_used | sequence_match | message_contains | message_regex | not_recently_used, or a custom type registered in code',
      ),
    value: z
      .string()
      .optional()
      .describe('Tool name (tool_used, not_recently_used), text (message_contains) or regex (message_regex)'),
    description: z.string().optional(),
    window: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('not_recently_used: how many of the latest tool uses to look at (default 5)'),
    flags: z.string().optional().describe('message_regex: flags among i, m, s, u (default "i")'),
    params: z.record(z.string(), z.unknown()).optional().describe('Parameters of a custom condition type'),
  })
  .describe('All conditions of a step must hold for it to become active');

/** Where a tool pattern is accepted: a name, a glob, or an annotation selector. */
const PATTERN_HELP =
  'tool names, globs (`*` is any run of characters) or MCP annotation selectors (@readOnly, @destructive, @idempotent, @openWorld; negated as !@readOnly)';

/** Allowed and denied tool patterns; `*` matches any run of characters; `@readOnly` etc. select by MCP annotations. */
export const availableToolsSchema = z.strictObject({
  allowed: z
    .array(z.string().min(1))
    .optional()
    .describe(`Tools the step allows: ${PATTERN_HELP}; absent or empty means every tool`),
  denied: z.array(z.string().min(1)).optional().describe(`Tools removed even when allowed: ${PATTERN_HELP}`),
});

const sequencePosition = z.union([
  z.string().min(1),
  z.array(z.string().min(1)).min(1).describe('Alternatives: any one of these tools fills the position'),
]);

/** A token budget: at most this many tokens (prompt plus completion). */
export const tokenBudgetSchema = z.strictObject({
  totalTokens: z.number().int().positive().describe('Most tokens (prompt plus completion) that may be spent'),
});

/** How many calls a limit rule allows, and over what. */
export const ruleLimitSchema = z.strictObject({
  max: z.number().int().nonnegative().describe('Most calls allowed in each period (0: none)'),
  per: z
    .string()
    .min(1)
    .describe(
      '"turn" (one user message), "step" (since the step became active), "session", or a rolling window such as "30s", "10m", "1h", "1d"',
    ),
});

/** A rule on calls (SPEC section 9): an effect or a limit for the tools it names. */
export const ruleSchema = z
  .strictObject({
    tools: z.array(z.string().min(1)).min(1).describe(`The tools the rule applies to: ${PATTERN_HELP}`),
    when: z
      .string()
      .min(1)
      .max(2000)
      .optional()
      .describe(
        'A CEL expression over tool (its name), args (the call input), state (the session) and context (from the caller); absent: always',
      ),
    effect: z
      .enum(['deny', 'approve', 'allow'])
      .optional()
      .describe(
        'deny: refused when `when` holds; approve: a person must approve it when `when` holds; allow: refused unless `when` holds',
      ),
    limit: ruleLimitSchema.optional().describe('At most `max` calls per period (running calls count)'),
    reason: z.string().min(1).describe('Why: what the model (and the person asked) reads'),
  })
  .describe('Give either an effect or a limit');

/** Most values a `union` or `append` fact keeps. */
export const MAX_FACT_VALUES = 10_000;

/** A name of a fact or a label: what rules read as `state.facts.<name>` or `state.labels`. */
const factName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'a letter or "_", then letters, digits and "_" (at most 64)');

/** Over what an operator's limit counts: one session (default), or across sessions. */
export const LIMIT_SCOPES = ['session', 'principal', 'agent', 'global'] as const;

/** A rule of the operator's policy (SPEC section 11): a rule on calls whose limit may count across sessions. */
export const policyRuleSchema = ruleSchema.extend({
  limit: ruleLimitSchema
    .extend({
      scope: z
        .enum(LIMIT_SCOPES)
        .optional()
        .describe(
          'What the limit counts over: "session" (default), "principal" (everything one caller does), "agent" (every session of the agent) or "global"',
        ),
    })
    .optional()
    .describe('At most `max` calls per period (running calls count), within the scope'),
});

/** The operator's policy (SPEC section 11): rules that apply to every agent and session, before any template's. */
export const policySchema = z.strictObject({
  $schema: z.string().optional(),
  description: text.optional(),
  rules: z.array(policyRuleSchema).describe("Rules judged before every template's; a template cannot loosen them"),
});

/** A fact (SPEC section 11): a value kept from completed calls' results, which rules read. */
export const factSchema = z.strictObject({
  name: factName.describe('What rules read: state.facts.<name>'),
  tools: z.array(z.string().min(1)).min(1).describe(`The calls whose results set it: ${PATTERN_HELP}`),
  value: z
    .string()
    .min(1)
    .max(2000)
    .describe('A CEL expression over tool, args, result (what the call returned) and state: the value kept'),
  when: z.string().min(1).max(2000).optional().describe('A CEL condition (same variables): absent, always'),
  keep: z
    .enum(['last', 'union', 'append'])
    .optional()
    .describe(
      'last (the latest replaces the earlier; default), union (a set of values), append (a list, oldest dropped)',
    ),
  max: z
    .number()
    .int()
    .positive()
    .max(MAX_FACT_VALUES)
    .optional()
    .describe(
      `Most values a union or append keeps (default 1000; at most ${MAX_FACT_VALUES}); a union past it is unknown`,
    ),
});

/** A label (SPEC section 11): raised by a condition on a call's result, never lowered in a session. */
export const labelSchema = z.strictObject({
  name: factName.describe("What rules read: 'name' in state.labels"),
  tools: z.array(z.string().min(1)).min(1).describe(`The calls whose results may raise it: ${PATTERN_HELP}`),
  when: z
    .string()
    .min(1)
    .max(2000)
    .optional()
    .describe('A CEL condition over tool, args, result and state; absent: every completed call of the tools raises it'),
  clearOnReset: z.boolean().optional().describe('A reset of the session lowers it (default: it stays raised)'),
});

/** One orchestration step. */
export const orchestrationStepSchema = z.strictObject({
  name: z.string().min(1).describe('Unique name of the step'),
  description: z.string().optional(),
  isDefault: z.boolean().optional().describe('Active when no step with conditions is chosen'),
  conditions: z.array(stepConditionSchema).optional(),
  availableTools: availableToolsSchema.optional(),
  sequence: z
    .array(sequencePosition)
    .optional()
    .describe('Tools required in this order, by exact name (not globs or annotation selectors)'),
  requireSequence: z
    .boolean()
    .optional()
    .describe(
      'While the sequence is unfinished, the model must call its next tool (toolChoice is forced) instead of answering',
    ),
  resetSequenceOn: z
    .array(z.union([z.string().min(1), stepConditionSchema]))
    .optional()
    .describe('"new_message", "out_of_sequence", a message condition type name, or a condition object'),
  instructions: text.optional().describe('Added to the system prompt while the step is active'),
  shadow: z.boolean().optional().describe("Overrides the orchestration's shadow setting while this step is active"),
  budget: tokenBudgetSchema
    .optional()
    .describe('Tokens the session may spend while this step is active; once spent, no tool is offered'),
  rules: z.array(ruleSchema).optional().describe('Rules on calls that apply while this step is active'),
});

/** The `orchestration` block of a template. */
export const orchestrationConfigSchema = z.strictObject({
  description: text.optional(),
  defaultStep: z.string().min(1).optional().describe('Name of the step used when no other step is chosen'),
  historyLimit: z.number().int().positive().optional().describe('Bound of recentlyUsedTools (default 50)'),
  shadow: z
    .boolean()
    .optional()
    .describe('Shadow mode: decisions are computed, recorded and shown ("would have blocked"), nothing is enforced'),
  budget: tokenBudgetSchema
    .optional()
    .describe('Tokens one session may spend; once spent, no tool is offered and the turn ends with an answer'),
  rules: z.array(ruleSchema).optional().describe('Rules on calls that apply in every step'),
  facts: z.array(factSchema).optional().describe("Values kept from completed calls' results, for rules"),
  labels: z.array(labelSchema).optional().describe("Labels raised by completed calls' results, for rules"),
  unlistedTools: z
    .enum(['hidden', 'allowed'])
    .optional()
    .describe(
      'MCP tools that the template\'s `tools` does not name: "hidden" (the default: never offered, never run) or "allowed" (offered like listed tools, steps still apply)',
    ),
  steps: z.array(orchestrationStepSchema),
});

/** The `llm` block of a template. Extra provider settings are kept. */
export const llmConfigSchema = z.looseObject({
  provider: z.string().min(1),
  model: z.string().min(1).optional(),
});

/** An agent template (AgentDock's `template.json` is accepted as is; unknown top-level keys are kept). */
export const agentTemplateSchema = z.looseObject({
  $schema: z.string().optional(),
  id: z.string().min(1).optional(),
  agentId: z.string().min(1).optional(),
  version: z.string().optional(),
  name: z.string().optional(),
  description: z.string().optional(),
  personality: text.optional(),
  llm: llmConfigSchema.optional(),
  tools: z
    .array(z.string().min(1))
    .optional()
    .describe(
      'Tool names of the agent; for MCP tools also globs and annotation selectors (@readOnly, !@destructive, ...) naming the upstream tools it may use',
    ),
  nodes: z
    .array(z.string().min(1))
    .optional()
    .describe('AgentDock style: "llm.<provider>" picks the model, every other entry is a tool'),
  nodeConfigurations: z.record(z.string(), z.unknown()).optional(),
  options: z.looseObject({ maxSteps: z.number().int().positive().optional() }).optional(),
  orchestration: orchestrationConfigSchema.optional(),
});

/** A condition object. */
export type StepCondition = z.infer<typeof stepConditionSchema>;
/** A rule on calls. */
export type Rule = z.infer<typeof ruleSchema>;
/** The operator's policy. */
export type Policy = z.infer<typeof policySchema>;
/** A rule of the operator's policy. */
export type PolicyRule = z.infer<typeof policyRuleSchema>;
/** A fact of the orchestration block. */
export type Fact = z.infer<typeof factSchema>;
/** A label of the orchestration block. */
export type Label = z.infer<typeof labelSchema>;
/** `availableTools` of a step. */
export type AvailableTools = z.infer<typeof availableToolsSchema>;
/** A sequence position: one tool, or alternatives. */
export type SequencePosition = z.infer<typeof sequencePosition>;
/** One orchestration step (AgentDock's `OrchestrationStep`). */
export type OrchestrationStep = z.infer<typeof orchestrationStepSchema>;
/** The `orchestration` block (AgentDock's `OrchestrationConfig`). */
export type OrchestrationConfig = z.infer<typeof orchestrationConfigSchema>;
/** The `llm` block. */
export type LLMConfig = z.infer<typeof llmConfigSchema>;

/** A validated template: the input's keys, plus `id`, `tools` and `llm` resolved from AgentDock's forms. */
export type AgentTemplate = z.infer<typeof agentTemplateSchema> & {
  /** `id`, else `agentId`. */
  id: string;
  /** `tools`, else the entries of `nodes` that are not `llm.*`. */
  tools: string[];
};

/** The JSON Schema of a template, for editors (committed as `schema/template.schema.json`). */
export function templateJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(agentTemplateSchema, { target: 'draft-2020-12', io: 'input' }) as Record<
    string,
    unknown
  >;
  return {
    ...schema,
    $id: 'https://baton.dev/schema/template.schema.json',
    title: 'Baton agent template',
    description:
      'An agent template: its model, tools and orchestration steps. AgentDock template.json files are valid.',
  };
}
