/**
 * `mcpTools()` against the MCP reference server `@modelcontextprotocol/server-everything`, spawned
 * over stdio and reached through `@ai-sdk/mcp`'s own client, inside a real AI SDK tool loop
 * driven by a hostile scripted model. The wire is the witness: every JSON-RPC message the client
 * sends to the server is recorded, so "never reaches the server" is checked where it matters.
 */
import { fileURLToPath } from 'node:url';
import { createMCPClient, type MCPClient, type MCPTransport } from '@ai-sdk/mcp';
import { StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { generateText, isStepCount, streamText } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orchestrate } from '../ai-sdk/orchestrate.js';
import { createOrchestratedAgent } from '../ai-sdk/orchestrated-agent.js';
import { orchestrationParts } from '../ai-sdk/orchestration-parts.js';
import { hasAnnotation } from '../core/tool-annotations.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { mcpTools } from './mcp-tools.js';

const SERVER = fileURLToPath(import.meta.resolve('@modelcontextprotocol/server-everything/dist/index.js'));

/** A transport that hands everything to the stdio transport and records what goes out. */
class RecordingTransport implements MCPTransport {
  readonly sent: { method?: string; params?: unknown }[] = [];
  readonly #inner: StdioMCPTransport;
  constructor(inner: StdioMCPTransport) {
    this.#inner = inner;
  }
  get supportsProtocolVersionDiscovery() {
    return this.#inner.supportsProtocolVersionDiscovery;
  }
  set onmessage(handler: MCPTransport['onmessage']) {
    this.#inner.onmessage = handler;
  }
  set onclose(handler: MCPTransport['onclose']) {
    this.#inner.onclose = handler;
  }
  set onerror(handler: MCPTransport['onerror']) {
    this.#inner.onerror = handler as StdioMCPTransport['onerror'];
  }
  start() {
    return this.#inner.start();
  }
  close() {
    return this.#inner.close();
  }
  send(message: Parameters<MCPTransport['send']>[0]) {
    this.sent.push(message as { method?: string; params?: unknown });
    return this.#inner.send(message);
  }
  /** The tools called on the server, with their arguments, in order. */
  calls(): { name: string; arguments: unknown }[] {
    return this.sent
      .filter((m) => m.method === 'tools/call')
      .map((m) => m.params as { name: string; arguments: unknown });
  }
}

let client: MCPClient;
let wire: RecordingTransport;

beforeAll(async () => {
  wire = new RecordingTransport(new StdioMCPTransport({ command: process.execPath, args: [SERVER, 'stdio'] }));
  client = await createMCPClient({ transport: wire });
}, 30_000);

afterAll(async () => {
  await client?.close();
});

/** The server's own tool list, read with the client directly (not through mcpTools). */
async function serverTools() {
  return (await client.listTools()).tools;
}

describe('mcpTools() with @ai-sdk/mcp and the reference server', () => {
  it('qualifies names by server, keeps what the template lists, carries the declared annotations', async () => {
    const declared = await serverTools();
    const readOnly = declared.filter((t) => t.annotations?.readOnlyHint === true).map((t) => t.name);
    // The reference server offers both kinds, or this test would prove nothing.
    expect(readOnly.length).toBeGreaterThan(2);
    expect(declared.length).toBeGreaterThan(readOnly.length);

    const mcp = await mcpTools({ everything: client }, { template: { tools: ['@readOnly'] } });
    expect(Object.keys(mcp.tools)).toEqual(readOnly.map((name) => `everything__${name}`));
    // Each tool still names its server's own tool, which its execute calls.
    for (const [name, tool] of Object.entries(mcp.tools)) {
      expect(`everything__${(tool.metadata as { toolName: string }).toolName}`).toBe(name);
    }
    expect(mcp.toolAnnotations.get('everything__echo')).toMatchObject({ readOnlyHint: true, destructiveHint: false });

    const all = await mcpTools(
      { everything: client },
      { template: { tools: [], orchestration: { unlistedTools: 'allowed' } } },
    );
    expect(Object.keys(all.tools)).toHaveLength(declared.length);
    const none = await mcpTools({ everything: client }, { template: { tools: ['other__*'] } });
    expect(Object.keys(none.tools)).toEqual([]);
    // Called again (as an app may each turn), the same annotations come back as the same map, so
    // the plan compiled for them is reused.
    const again = await mcpTools({ everything: client }, { template: { tools: ['@readOnly'] } });
    expect(again.toolAnnotations).toBe(mcp.toolAnnotations);
    const manager = createOrchestrationManager();
    const template = { id: 't', tools: ['@readOnly'], orchestration: { steps: [] } };
    expect(manager.plan(template, again.toolAnnotations)).toBe(manager.plan(template, mcp.toolAnnotations));
  });

  it('a hostile model calling hidden, denied and out-of-sequence tools never reaches the server', async () => {
    const template = {
      id: 'mcp-agent',
      tools: ['@readOnly'],
      orchestration: {
        steps: [
          {
            name: 'Look',
            isDefault: true,
            availableTools: { denied: ['everything__get-env'] },
            sequence: ['everything__echo', 'everything__get-sum'],
          },
        ],
      },
    };
    const mcp = await mcpTools({ everything: client }, { template });
    expect(Object.keys(mcp.tools)).not.toContain('everything__toggle-simulated-logging');
    const before = wire.calls().length;
    const model = new ScriptedModel([
      {
        toolCalls: [
          // Hidden: not read-only, so the template does not list it.
          { toolName: 'everything__toggle-simulated-logging', input: {} },
          // Denied by the step, though listed.
          { toolName: 'everything__get-env', input: {} },
          // Listed and allowed, but the sequence wants echo first.
          { toolName: 'everything__get-sum', input: { a: 1, b: 2 } },
          // The server's own name, unqualified: no such tool here.
          { toolName: 'echo', input: { message: 'sneaky' } },
        ],
      },
      { toolCalls: [{ toolName: 'everything__echo', input: { message: 'hello' } }] },
      { toolCalls: [{ toolName: 'everything__get-sum', input: { a: 2, b: 3 } }] },
      { text: 'Done.' },
    ]);
    const manager = createOrchestrationManager();
    const messages = [{ role: 'user' as const, content: 'look around' }];
    const orchestration = orchestrate({
      manager,
      config: template,
      sessionId: 'hostile',
      messages,
      onError: () => undefined,
      ...mcp,
    });
    const result = await generateText({ model, messages, stopWhen: isStepCount(8), ...orchestration });
    await orchestration.settled();

    expect(wire.calls().slice(before)).toEqual([
      { name: 'echo', arguments: { message: 'hello' } },
      { name: 'get-sum', arguments: { a: 2, b: 3 } },
    ]);
    expect(model.offeredTools().slice(0, 3)).toEqual([
      ['everything__echo'],
      ['everything__echo'],
      ['everything__get-sum'],
    ]);
    // Tools not offered for the step are refused by the AI SDK itself (the model is told they are
    // unavailable); the two allowed calls got the server's answers.
    const outputs = JSON.stringify(result.steps.flatMap((step) => step.content));
    expect(outputs).toContain("unavailable tool 'everything__toggle-simulated-logging'");
    expect(outputs).toContain("unavailable tool 'everything__get-env'");
    expect(outputs).toContain('Echo: hello');
    expect(outputs).toContain('The sum of 2 and 3 is 5');
    expect(await manager.getState('hostile')).toMatchObject({
      recentlyUsedTools: ['everything__echo', 'everything__get-sum'],
    });
  });

  it("a call that skips the AI SDK's checks and runs a refused tool directly is refused by its guard", async () => {
    const template = {
      id: 'mcp-direct',
      tools: ['@readOnly'],
      orchestration: {
        steps: [{ name: 'Look', isDefault: true, availableTools: { denied: ['everything__get-env'] } }],
      },
    };
    const mcp = await mcpTools({ everything: client }, { template });
    const manager = createOrchestrationManager();
    const messages = [{ role: 'user' as const, content: 'read the environment' }];
    const orchestration = orchestrate({
      manager,
      config: template,
      sessionId: 'direct',
      messages,
      onError: () => undefined,
      ...mcp,
    });
    const before = wire.calls().length;
    const getEnv = orchestration.tools['everything__get-env']!;
    await expect(
      getEnv.execute!({}, { toolCallId: 'forged-1', messages: [], context: {} } as never),
    ).rejects.toMatchObject({ name: 'ToolRejectedError', tool: 'everything__get-env' });
    expect(wire.calls().slice(before)).toEqual([]);
    await orchestration.settled();
  });

  it('annotation selectors in a step judge MCP tools by what they declare, and explain says which', async () => {
    const template = {
      id: 'mcp-selectors',
      tools: ['everything__*'],
      orchestration: {
        steps: [{ name: 'Safe', isDefault: true, availableTools: { allowed: ['@readOnly'], denied: ['@openWorld'] } }],
      },
    };
    const declared = await serverTools();
    const mcp = await mcpTools({ everything: client }, { template });
    const expected = declared
      .filter((t) => hasAnnotation('@readOnly', t.annotations) && !hasAnnotation('@openWorld', t.annotations))
      .map((t) => `everything__${t.name}`);
    // A tool the step refuses for not being read-only (not for being open-world, checked first).
    const writer = declared.find(
      (t) => !hasAnnotation('@readOnly', t.annotations) && !hasAnnotation('@openWorld', t.annotations),
    )!;
    const before = wire.calls().length;
    const model = new ScriptedModel([
      { toolCalls: [{ toolName: `everything__${writer.name}`, input: {} }] },
      { text: 'Done.' },
    ]);
    const manager = createOrchestrationManager();
    const messages = [{ role: 'user' as const, content: 'go' }];
    const orchestration = orchestrate({ manager, config: template, sessionId: 'sel', messages, ...mcp });
    await generateText({ model, messages, stopWhen: isStepCount(4), ...orchestration });
    await orchestration.settled();

    expect(model.offeredTools()[0]).toEqual(expected);
    expect(wire.calls().slice(before)).toEqual([]);
    const explained = await manager.explain(
      manager.plan(template, mcp.toolAnnotations),
      messages,
      'sel',
      Object.keys(mcp.tools),
    );
    const echo = explained.tools.find((t) => t.tool === 'everything__echo');
    expect(echo).toMatchObject({ allowed: true, allowedBy: '@readOnly' });
    const refused = explained.tools.find((t) => t.tool === `everything__${writer.name}`);
    expect(refused?.reason?.message).toContain('"@readOnly" (read-only tools: readOnlyHint true)');
  });

  it('orchestrationParts() shows the tools the turn allowed, judged by the same annotations', async () => {
    const template = {
      id: 'mcp-parts',
      tools: ['everything__*'],
      orchestration: { steps: [{ name: 'Safe', isDefault: true, availableTools: { allowed: ['@readOnly'] } }] },
    };
    const mcp = await mcpTools({ everything: client }, { template });
    const manager = createOrchestrationManager();
    const parts = orchestrationParts({ manager, config: template, toolAnnotations: mcp.toolAnnotations });
    const model = new ScriptedModel([{ text: 'Nothing to do.' }]);
    const orchestration = orchestrate({ manager, config: template, sessionId: 'parts', onStep: parts.onStep, ...mcp });
    const result = streamText({ model, prompt: 'hi', stopWhen: isStepCount(2), ...orchestration });
    const chunks: { type: string; data?: { allowedTools: string[]; final: boolean } }[] = [];
    const reader = parts.stream(result.toUIMessageStream(), orchestration).getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) chunks.push(read.value as never);
    const snapshots = chunks.filter((c) => c.type === 'data-orchestration').map((c) => c.data!);
    const final = snapshots.find((s) => s.final);
    expect(final?.allowedTools).toEqual(model.offeredTools()[0]);
    expect(final?.allowedTools).toContain('everything__echo');
    expect(final?.allowedTools).not.toContain('everything__toggle-simulated-logging');
  });

  it('createOrchestratedAgent takes the same tools and annotations', async () => {
    const template = {
      id: 'mcp-agent-class',
      tools: ['everything__*'],
      orchestration: { steps: [{ name: 'Write', isDefault: true, availableTools: { allowed: ['!@readOnly'] } }] },
    };
    const declared = await serverTools();
    const mcp = await mcpTools({ everything: client }, { template });
    const model = new ScriptedModel([{ toolCalls: [{ toolName: 'everything__echo', input: { message: 'x' } }] }]);
    const agent = createOrchestratedAgent({
      model,
      manager: createOrchestrationManager(),
      config: template,
      stopWhen: isStepCount(3),
      ...mcp,
    });
    const before = wire.calls().length;
    const result = await agent.generate({ prompt: 'change something', options: { sessionId: 'agent' } });
    await result.orchestration.settled();
    expect(model.offeredTools()[0]).toEqual(
      declared.filter((t) => !hasAnnotation('@readOnly', t.annotations)).map((t) => `everything__${t.name}`),
    );
    expect(wire.calls().slice(before)).toEqual([]);
  });

  it('refuses to run without the template: forgetting it must not hand the model every tool', async () => {
    await expect(mcpTools({ everything: client }, undefined as never)).rejects.toThrow(
      /pass it as mcpTools\(clients, \{ template \}\)/,
    );
    await expect(mcpTools({ everything: client }, {} as never)).rejects.toMatchObject({ code: 'invalid-argument' });
  });

  it('refuses server names that cannot be part of a tool name, and colliding names', async () => {
    await expect(
      mcpTools({ 'my server': client }, { template: { orchestration: { unlistedTools: 'allowed' } } }),
    ).rejects.toThrow(/server name "my server"/);
    await expect(
      mcpTools({ a__b: client }, { template: { orchestration: { unlistedTools: 'allowed' } } }),
    ).rejects.toThrow(/not "__"/);
    const echo = { description: 'x', inputSchema: {}, execute: async () => 'x' };
    // A server that names its tools after Object's own properties gets them as plain tools.
    const odd = Object.assign(Object.create(null), { ['__proto__']: echo, constructor: echo }) as never;
    const single = await mcpTools(
      { tools: async () => odd },
      { template: { orchestration: { unlistedTools: 'allowed' } } },
    );
    expect(Object.keys(single.tools)).toEqual(['__proto__', 'constructor']);
    expect(Object.getPrototypeOf(single.tools)).toBe(null);
    await expect(
      mcpTools({ a: { _b: echo }, a_: { b: echo } } as never, {
        template: { orchestration: { unlistedTools: 'allowed' } },
      }),
    ).rejects.toThrow(/two tools are both named "a___b"/);
  });
});
