/**
 * Baton: orchestration for tool-using LLM agents. The public surface, as an explicit list: what
 * the README teaches, and the types its signatures name. The engine's own machinery (the pure
 * transition, the step functions below it, the template graph) is at `baton-agents/internal`.
 */

export type { BudgetStatus } from './core/budget-status.js';
export {
  type CompileOptions,
  compileOrchestration,
  type OrchestrationPlan,
  type OrchestrationSource,
} from './core/compile.js';
export type { CompiledStep, SequenceSlot } from './core/compiled-step.js';
export {
  type ConditionContext,
  type ConditionDefinition,
  ConditionRegistry,
  type ConditionTest,
  type MessageInfo,
  registerConditionType,
} from './core/conditions.js';
export type { SequenceView } from './core/engine.js';
export {
  BatonError,
  type BatonErrorCode,
  type BatonErrorOptions,
  InvalidArgumentError,
  LeaseLostError,
  MissingDependencyError,
  SessionDeletedError,
  SessionRefusedError,
  StoreClosedError,
  StoreConflictError,
  StoreUnavailableError,
  UnsupportedRuntimeError,
} from './core/errors.js';
export type { OrchestrationEvent, OrchestrationEventType, ToolDenial } from './core/events.js';
export { type ChatMessage, latestUserMessage, messageText } from './core/messages.js';
export {
  type CompiledPolicy,
  compilePolicy,
  type PolicyValidationResult,
  parsePolicy,
  validatePolicy,
} from './core/policy.js';
export {
  type AgentTemplate,
  type AvailableTools,
  type Fact,
  type Label,
  type LLMConfig,
  type OrchestrationConfig,
  type OrchestrationStep,
  type Policy,
  type PolicyRule,
  type SequencePosition,
  type StepCondition,
  templateJsonSchema,
} from './core/schema.js';
// What a store of your own needs to keep event logs (SessionStore.readLog).
export {
  assertLogEntry,
  type LoggedEvent,
  type LoggedFact,
  logEntriesOf,
  type SessionLogEntry,
  type SessionLogState,
} from './core/session-log.js';
export {
  type AIOrchestrationState,
  DEFAULT_HISTORY_LIMIT,
  DEFAULT_SESSION_TTL_MS,
  type FactValue,
  type OrchestrationState,
  type PendingEntry,
  type PendingMessage,
  type TokenUsage,
} from './core/state.js';
export {
  formatIssues,
  TemplateConfigError,
  type TemplateIssue,
  TemplateIssueCode,
} from './core/template-issues.js';
export type { TokenUsageInput } from './core/token-usage.js';
export type { ToolAnnotations } from './core/tool-annotations.js';
export {
  DEFAULT_LEASE_MS,
  type ExplainedRule,
  type Explanation,
  MAX_PENDING_ENTRIES,
  type StepDecision,
  type ToolDecision,
  type ToolExplanation,
  type TransitionDecision,
  type TransitionInput,
  type WaitEnd,
} from './core/transition.js';
export {
  type OrchestrationValidationResult,
  parseTemplate,
  type TemplateValidationResult,
  templateTools,
  type ValidateTemplateOptions,
  validateOrchestration,
  validateTemplate,
} from './core/validate-template.js';
export { DEFAULT_WAIT_MS } from './orchestration/call-waits.js';
export {
  type AppliedInputs,
  createOrchestrationManager,
  type EventListener,
  OrchestrationManager,
  type OrchestrationManagerOptions,
} from './orchestration/orchestration-manager.js';
export {
  createOrchestrationStateManager,
  OrchestrationStateManager,
  type OrchestrationStateManagerOptions,
  type StatePatch,
} from './orchestration/state-manager.js';
export { createStepSequencer, StepSequencer } from './orchestration/step-sequencer.js';
export { Turn, type TurnOptions, type TurnStep } from './orchestration/turn.js';
export { type MemoryStoreOptions, memoryStore } from './stores/memory.js';
export { resolveStore, type StoreSpec } from './stores/resolve-store.js';
export {
  decodeStateToken,
  encodeStateToken,
  parseStateKeys,
  StateTokenError,
  StateTokenErrorReason,
} from './stores/state-token.js';
export type { SessionStore, StateUpdater, StoreOptions } from './stores/types.js';
export { loadTemplate } from './templates/load-template.js';
