/**
 * `baton-agents/ai-sdk`: orchestration inside Vercel AI SDK 7 tool loops, providers and the offline model.
 */
export {
  CoreLLM,
  createLLM,
  type GenerateTextOptions,
  LLM_PROVIDERS,
  type LLMOptions,
  type LLMProvider,
  MissingApiKeyError,
  parseModelSpec,
  type StreamTextOptions,
  templateLLMOptions,
  type WithoutModel,
} from './core-llm.js';
export {
  LLMOrchestrationService,
  type OrchestratedStreamResult,
  type StreamExtraOptions,
  type StreamWithOrchestrationOptions,
} from './llm-orchestration-service.js';
export { createOfflineModel, type OfflineModelOptions } from './offline-model.js';
export {
  type CallStart,
  type OrchestrateOptions,
  type Orchestration,
  OrchestrationWiringError,
  orchestrate,
  type RuntimeContext,
  type SequenceIncomplete,
  type StepInfo,
  type ToolApprovalArguments,
  ToolRejectedError,
  type WiringProblem,
} from './orchestrate.js';
export {
  createOrchestratedAgent,
  OrchestratedAgent,
  type OrchestratedAgentSettings,
  type OrchestratedCallOptions,
  type OrchestratedGenerateParameters,
  type OrchestratedStreamParameters,
  orchestratedCallOptionsSchema,
  type WithOrchestration,
} from './orchestrated-agent.js';
export {
  ORCHESTRATION_PART_ID,
  type OrchestrationOutcome,
  type OrchestrationParts,
  type OrchestrationPartsOptions,
  orchestrationParts,
} from './orchestration-parts.js';
export type {
  OrchestrationDataParts,
  OrchestrationSnapshot,
  OrchestrationUIMessage,
  SequenceIncompleteSummary,
  SequenceProgress,
} from './orchestration-snapshot.js';
export {
  MIN_TOOL_APPROVAL_KEY_BYTES,
  type SignedToolApproval,
  type ToolApprovalScope,
  toolApprovalSecret,
  verifyToolApprovalSignature,
} from './tool-approval-secret.js';
