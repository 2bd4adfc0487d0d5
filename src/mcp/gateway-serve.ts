/**
 * Running the MCP gateway as a process: over stdio (one session, the connection's), the way
 * desktop MCP clients start servers. The CLI (`baton mcp`) loads this module only when the
 * command runs, so the MCP SDK stays an optional peer that only gateway users install.
 */
import type { Readable, Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { McpGateway, type McpGatewayOptions } from './gateway.js';

/** Options of {@link serveStdio}. */
export interface ServeStdioOptions extends McpGatewayOptions {
  /** The named orchestration session to continue (default: a new one). */
  sessionId?: string | undefined;
  stdin: Readable;
  stdout: Writable;
  /** Ends the session when aborted (Ctrl-C, SIGTERM). */
  signal?: AbortSignal | undefined;
}

/** Serves one MCP session on stdin/stdout; resolves when the client disconnects or `signal` aborts. */
export async function serveStdio(options: ServeStdioOptions): Promise<void> {
  const gateway = new McpGateway(options);
  const transport = new StdioServerTransport(options.stdin, options.stdout);
  const closed = new Promise<void>((resolve) => {
    void gateway.connect(transport, { sessionId: options.sessionId, onClosed: () => resolve() });
    // stdin ends when the client goes away; the SDK's transport does not report that by itself.
    options.stdin.once('end', () => void transport.close());
    options.signal?.addEventListener('abort', () => void gateway.close(), { once: true });
  });
  await closed;
}
