/**
 * `baton-agents/internal`: the engine's own machinery, for tests, tools built on Baton and the
 * curious. Not the way to use Baton: the step functions below the transition change a state
 * without its pending log (they know nothing of running calls), and the pure transition is what
 * the manager and `Turn` feed. Names here may change in any release.
 */
export { compileStep } from './core/compile.js';
export { defaultConditionRegistry } from './core/conditions.js';
export { type DependenceTable, dependenceOf } from './core/dependence.js';
export {
  type AllowedToolsResult,
  activeStepOf,
  addTokenUsage,
  allowedTools,
  budgetDenial,
  budgetOf,
  changeStep,
  chooseStep,
  denialOf,
  type EngineResult,
  handleMessage,
  normalizeUsage,
  recordToolUse,
  selectStep,
  type ToolUseInput,
} from './core/engine.js';
export { type CallPlace, type SettledView, settledView } from './core/pending-log.js';
export { createState, TOOL_CALL_IDS_LIMIT, toAIState } from './core/state.js';
export {
  type GraphRenderOptions,
  type TemplateGraph,
  type TemplateGraphEdge,
  type TemplateGraphNode,
  templateGraph,
  toDot,
  toMermaid,
} from './core/template-graph.js';
export {
  ANNOTATION_SELECTORS,
  type AnnotationSelector,
  type AnnotationSelectorName,
  type DeclaredTool,
  hasAnnotation,
  parseSelector,
  selectTools,
} from './core/tool-annotations.js';
export {
  decideToolCall,
  explain,
  isRefusedMessage,
  type LeaseDecision,
  type MessageDecision,
  type MessageRefusal,
  type RecordDecision,
  runningTools,
  settledState,
  shadowOf,
  type ToolCallRequest,
  type TransitionAllResult,
  type TransitionContext,
  type TransitionResult,
  transition,
  transitionAll,
} from './core/transition.js';
