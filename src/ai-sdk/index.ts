/**
 * `baton/ai-sdk`: orchestration inside Vercel AI SDK 7 tool loops, providers and the offline model.
 */
export {
  CoreLLM,
  createLLM,
  LLM_PROVIDERS,
  type LLMOptions,
  type LLMProvider,
  MissingApiKeyError,
  parseModelSpec,
  templateLLMOptions,
} from './core-llm.js';
export {
  LLMOrchestrationService,
  type OrchestratedStreamResult,
  type StreamWithOrchestrationOptions,
} from './llm-orchestration-service.js';
export { createOfflineModel, type OfflineModelOptions } from './offline-model.js';
export {
  type OrchestrateOptions,
  type Orchestration,
  orchestrate,
  type StepInfo,
  ToolRejectedError,
} from './orchestrate.js';
