/**
 * What the gateway tells the model, and what it records, when a call needs a person's approval
 * and no person approves it: a person who declines (final: recorded as `approval-declined` in the
 * session's event log, said to the model as a decline), a client that cannot ask anyone, a
 * person who dismisses the question. The upstream counts what reached it: nothing, each time.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { type CallToolResult, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { OrchestrationEvent } from '../src/core/events.js';
import type { SessionLogEntry } from '../src/core/session-log.js';
import { validateTemplate } from '../src/core/validate-template.js';
import { McpGateway } from '../src/mcp/gateway.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { ROOT, textOf } from './helpers/mcp-gateway.js';

const FAULTY = join(ROOT, 'test/fixtures/mcp-faulty-upstream.ts');

const parsed = validateTemplate({
  id: 'careful',
  tools: ['ok'],
  orchestration: {
    steps: [{ name: 'Start', isDefault: true, availableTools: { allowed: ['ok'] } }],
    rules: [{ tools: ['ok'], effect: 'approve', reason: 'A person checks every call' }],
  },
});
if (!parsed.success) throw new Error(JSON.stringify(parsed.issues));
const TEMPLATE = parsed.template;

/** A gateway in this process whose client answers approvals with `answer` (none: no elicitation). */
async function gatewayWith(answer: 'accept' | 'decline' | 'cancel' | undefined) {
  const manager = createOrchestrationManager({ eventLog: 100 });
  const events: OrchestrationEvent[] = [];
  manager.subscribe((event) => events.push(event));
  const calls = join(mkdtempSync(join(tmpdir(), 'baton-mcp-approvals-')), 'calls');
  const gateway = new McpGateway({
    template: TEMPLATE,
    upstreams: [{ command: process.execPath, args: ['--import', 'tsx', FAULTY] }],
    env: { ...process.env, CALLS_FILE: calls },
    manager,
    upstreamStderr: 'ignore',
  });
  const sessionId = `approvals-${randomUUID()}`;
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await gateway.connect(serverSide, { sessionId });
  const client = new Client(
    { name: 'test', version: '1' },
    answer === undefined ? {} : { capabilities: { elicitation: {} } },
  );
  const asked: string[] = [];
  if (answer !== undefined) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(String(request.params.message));
      return answer === 'accept' ? { action: 'accept', content: {} } : { action: answer };
    });
  }
  await client.connect(clientSide);
  return {
    client,
    manager,
    events,
    asked,
    sessionId,
    /** What reached the upstream, one tool name per call. */
    upstreamCalls: () => (existsSync(calls) ? readFileSync(calls, 'utf8').split('\n').filter(Boolean) : []),
    log: async (): Promise<SessionLogEntry[]> => {
      const store = await manager.getStateManager().store();
      return store.readLog!(sessionId);
    },
    close: async () => {
      await client.close();
      await gateway.close();
      await manager.close();
    },
  };
}

type Opened = Awaited<ReturnType<typeof gatewayWith>>;
const refusalCode = (result: CallToolResult) =>
  (result._meta?.['baton/refusal'] as { code?: string } | undefined)?.code;

describe('a call that needs a person, at the MCP gateway', () => {
  let opened: Opened | undefined;
  afterEach(async () => {
    await opened?.close();
    opened = undefined;
  });

  it('tells the model a person declined, and not to ask again; records who declined what, when', async () => {
    opened = await gatewayWith('decline');
    const started = Date.now();
    const result = (await opened.client.callTool({ name: 'ok', arguments: { ms: 1 } })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(
      'Tool "ok" was not run: a person declined this call; do not ask again for it (A person checks every call: a person must approve this call). Allowed tools now: ok.',
    );
    expect(refusalCode(result)).toBe('approval-declined');
    expect(opened.asked).toHaveLength(1);
    expect(opened.upstreamCalls()).toEqual([]);

    // An event for every listener (telemetry), and in the session's event log after the question.
    const declined = opened.events.filter(
      (event): event is Extract<OrchestrationEvent, { type: 'approval-declined' }> =>
        event.type === 'approval-declined',
    );
    expect(declined).toEqual([
      {
        type: 'approval-declined',
        sessionId: opened.sessionId,
        tool: 'ok',
        toolCallId: expect.stringMatching(/-approved$/),
        step: 'Start',
        rule: 'rules[0]',
      },
    ]);
    const log = await opened.log();
    const types = log.map((entry) => entry.event.type);
    expect(types.indexOf('approval-declined')).toBeGreaterThan(types.indexOf('approval-requested'));
    const entry = log.find((logged) => logged.event.type === 'approval-declined')!;
    expect(entry.event).toEqual({
      type: 'approval-declined',
      tool: 'ok',
      toolCallId: declined[0]!.toolCallId,
      step: 'Start',
      rule: 'rules[0]',
    });
    expect(entry.at).toBeGreaterThanOrEqual(started - 1_000);
    // The session no longer keeps the approval it asked for: that question is closed.
    expect((await opened.manager.getStateManager().getState(opened.sessionId))?.approvals ?? []).toEqual([]);
  }, 30_000);

  it('says that this client cannot ask a person, which is no decline, and records no decline', async () => {
    opened = await gatewayWith(undefined);
    const result = (await opened.client.callTool({ name: 'ok', arguments: { ms: 1 } })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(
      'Tool "ok" was not run: A person checks every call: a person must approve this call (no person was asked: this MCP client cannot ask one, as it does not support elicitation). Allowed tools now: ok.',
    );
    expect(refusalCode(result)).toBe('approval-required');
    expect(opened.events.map((event) => event.type)).not.toContain('approval-declined');
    expect(opened.upstreamCalls()).toEqual([]);
  }, 30_000);

  it('says a dismissed question got no answer, and records no decline', async () => {
    opened = await gatewayWith('cancel');
    const result = (await opened.client.callTool({ name: 'ok', arguments: { ms: 1 } })) as CallToolResult;
    expect(textOf(result)).toContain('(the person asked gave no answer)');
    expect(textOf(result)).not.toContain('declined');
    expect(refusalCode(result)).toBe('approval-required');
    expect(opened.asked).toHaveLength(1);
    expect(opened.events.map((event) => event.type)).not.toContain('approval-declined');
    expect(opened.upstreamCalls()).toEqual([]);
  }, 30_000);

  it('runs the call a person approved, and records no decline', async () => {
    opened = await gatewayWith('accept');
    const result = (await opened.client.callTool({ name: 'ok', arguments: { ms: 1 } })) as CallToolResult;
    expect(textOf(result)).toBe('ok');
    expect(opened.upstreamCalls()).toEqual(['ok']);
    expect(opened.events.map((event) => event.type)).not.toContain('approval-declined');
  }, 30_000);
});
