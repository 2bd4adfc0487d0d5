/**
 * `baton-agents/agents`: running agents from templates, and the built-in tools.
 */
export {
  type Agent,
  type CreateAgentOptions,
  createAgent,
  type HandleMessageOptions,
  type HandleMessageStreamOptions,
} from './create-agent.js';
export { builtinTools, type ResolvedTools, resolveTools } from './tools/index.js';
