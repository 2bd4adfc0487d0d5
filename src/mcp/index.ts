/**
 * `baton-agents/mcp`: Baton's policy for tools that arrive over the Model Context Protocol.
 * `mcpTools()` prepares the tools of `@ai-sdk/mcp` clients for `orchestrate()` in your own AI SDK
 * loop. `McpGateway` is the gateway `baton mcp` runs (connect it to any MCP server transport,
 * e.g. to embed it in your own server). The MCP packages are optional peers, loaded only by this
 * subpath.
 */

export {
  GatewaySession,
  type GatewaySessionOptions,
  GatewaySetupError,
  McpGateway,
  type McpGatewayOptions,
} from './gateway.js';
export { DEFAULT_RESTART_POLICY, type RestartPolicy } from './gateway-link.js';
export type { UpstreamSpec } from './gateway-upstream.js';
export {
  type McpToolSource,
  type McpTools,
  type McpToolsOptions,
  type McpToolsTemplate,
  mcpTools,
} from './mcp-tools.js';
