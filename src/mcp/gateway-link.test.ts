import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_RESTART_POLICY, restartPolicy, UpstreamLink } from './gateway-link.js';
import type { UpstreamConnection } from './gateway-upstream.js';

/** What a link uses of the SDK's client: its close, its connection, its handlers. */
class FakeClient {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  transport: object | undefined = {};
  async close(): Promise<void> {
    this.exit();
  }
  /** The upstream process exits: the connection closes. */
  exit(): void {
    if (this.transport === undefined) return;
    this.transport = undefined;
    this.onclose?.();
  }
}

const SPEC = { command: 'server', args: ['--flag'] };

function connection(client: FakeClient): UpstreamConnection {
  return {
    spec: SPEC,
    prefix: '',
    client: client as unknown as Client,
    get available() {
      return client.transport !== undefined;
    },
  };
}

describe('an upstream link', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A link whose restarts fail while `failing` is true; what it says, and when it went down or up. */
  function link(policy = {}) {
    const said: string[] = [];
    const events: string[] = [];
    const clients = [new FakeClient()];
    const state = { failing: false };
    const upstream = new UpstreamLink(connection(clients[0]!), {
      session: () => 's1',
      policy: restartPolicy({ initialDelayMs: 100, maxDelayMs: 400, stableMs: 1_000, maxFailures: 6, ...policy }),
      connect: async () => {
        if (state.failing) throw new Error('no such program');
        const client = new FakeClient();
        clients.push(client);
        return connection(client);
      },
      onDown: () => events.push('down'),
      onUp: async () => {
        events.push('up');
      },
      report: (message) => said.push(message),
    });
    return { upstream, said, events, clients, state, current: () => clients[clients.length - 1]! };
  }

  it('restarts an upstream that exited, after 100 ms, and says which session and upstream', async () => {
    const { upstream, said, events, current } = link();
    current().exit();
    expect(upstream.state).toBe('restarting');
    expect(upstream.available).toBe(false);
    expect(upstream.unavailable()).toBe(
      'the upstream MCP server "server --flag" exited and is restarting; try again in a moment',
    );
    expect(said).toEqual(['session "s1": upstream "server --flag" exited; restarting it in 100 ms']);
    await vi.advanceTimersByTimeAsync(99);
    expect(upstream.state).toBe('restarting');
    await vi.advanceTimersByTimeAsync(1);
    expect(upstream.available).toBe(true);
    expect(upstream.client).toBe(current());
    expect(events).toEqual(['down', 'up']);
    expect(said.at(-1)).toBe('session "s1": upstream "server --flag" is back (restart 1)');
  });

  it('doubles the wait after each failure up to the cap, and starts over once the upstream ran stably', async () => {
    const { upstream, said, state, current } = link({ maxFailures: 10 });
    state.failing = true;
    current().exit();
    for (const ms of [100, 200, 400, 400]) await vi.advanceTimersByTimeAsync(ms);
    expect(said.map((line) => /in (\d+) ms$/.exec(line)?.[1])).toEqual(['100', '200', '400', '400', '400']);
    expect(said[1]).toBe(
      'session "s1": upstream "server --flag" could not be restarted (no such program); restarting it in 200 ms',
    );
    state.failing = false;
    await vi.advanceTimersByTimeAsync(400);
    expect(upstream.available).toBe(true);
    // Up for less than stableMs: the next exit waits as long as the last failure did, doubled.
    await vi.advanceTimersByTimeAsync(500);
    current().exit();
    expect(said.at(-1)).toMatch(/exited; restarting it in 400 ms$/);
    await vi.advanceTimersByTimeAsync(400);
    // Up for stableMs: the count starts over.
    await vi.advanceTimersByTimeAsync(1_000);
    current().exit();
    expect(said.at(-1)).toMatch(/exited; restarting it in 100 ms$/);
    await vi.advanceTimersByTimeAsync(100);
    expect(upstream.restarts).toBe(3);
  });

  it('gives up after maxFailures within the window, says so once, and restarts nothing more', async () => {
    const { upstream, said, state, current } = link({ maxFailures: 3 });
    state.failing = true;
    current().exit();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(upstream.state).toBe('stopped');
    const givenUp = said.filter((line) => line.includes('not restarted again'));
    expect(givenUp).toEqual([
      'session "s1": upstream "server --flag" could not be restarted (no such program); it failed 3 times within 60 s, so it is not restarted again: its tools stay unavailable to this session until the client reconnects',
    ]);
    expect(upstream.unavailable()).toBe(
      'the upstream MCP server "server --flag" could not be restarted (no such program) and is not restarted again (it failed 3 times within 60 s); reconnect to try again',
    );
    state.failing = false;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(upstream.state).toBe('stopped');
    expect(said).toHaveLength(3);
  });

  it('restarts nothing once closed, even while a restart was waiting', async () => {
    const { upstream, clients, current } = link();
    current().exit();
    await upstream.close();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(upstream.state).toBe('closed');
    expect(clients).toHaveLength(1);
  });
});

describe('restartPolicy', () => {
  it('fills in the defaults', () => {
    expect(restartPolicy(undefined)).toEqual(DEFAULT_RESTART_POLICY);
    expect(restartPolicy({ maxFailures: 2 })).toEqual({ ...DEFAULT_RESTART_POLICY, maxFailures: 2 });
  });

  it('says which value is wrong', () => {
    expect(() => restartPolicy({ initialDelayMs: 0 })).toThrow(
      'restart.initialDelayMs must be a whole number of at least 1, not 0',
    );
    expect(() => restartPolicy({ windowMs: 1.5 })).toThrow(
      'restart.windowMs must be a whole number of at least 1, not 1.5',
    );
    expect(() => restartPolicy({ maxFailures: Number.NaN })).toThrow('restart.maxFailures must be');
    expect(() => restartPolicy({ initialDelayMs: 500, maxDelayMs: 100 })).toThrow(
      'restart.maxDelayMs (100) is less than restart.initialDelayMs (500)',
    );
  });
});
