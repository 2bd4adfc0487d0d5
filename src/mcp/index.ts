/**
 * `baton-agents/mcp`: Baton's policy for tools that arrive over the Model Context Protocol.
 * `mcpTools()` prepares the tools of `@ai-sdk/mcp` clients for `orchestrate()` in your own AI SDK
 * loop. The MCP packages are optional peers, loaded only by this subpath.
 */
export {
  type McpToolSource,
  type McpTools,
  type McpToolsOptions,
  type McpToolsTemplate,
  mcpTools,
} from './mcp-tools.js';
