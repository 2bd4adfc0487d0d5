/**
 * One gateway session's connection to one upstream, kept up for the session's life. A spawned
 * upstream that exits (its connection closes) and a URL upstream that stops answering are
 * connected again with backoff, the way process supervisors restart a service: the first
 * restart soon, each failure after doubling the wait up to a cap, the count starting over once
 * the upstream has run stably for a while; after too many failures within a window the session
 * gives up on it and says so once. While it is down its tools are not offered, and what is sent
 * to it is answered at once with why (never the MCP client's bare "Not connected").
 *
 * Every line for the operator names the session and the upstream: one gateway process serves
 * many sessions over HTTP, each with its own upstream processes.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { InvalidArgumentError } from '../core/errors.js';
import { describeUpstream, messageOf, type UpstreamConnection, type UpstreamSpec } from './gateway-upstream.js';

/** When and how often a session connects to an upstream again after it went away. */
export interface RestartPolicy {
  /** Wait before the first restart (ms). */
  readonly initialDelayMs: number;
  /** Longest wait between restarts (ms): each failure in a row doubles the wait, up to this. */
  readonly maxDelayMs: number;
  /** An upstream that ran this long (ms) since it was last started ran stably: its next failure waits `initialDelayMs` again and starts a new count. */
  readonly stableMs: number;
  /** Give up after this many failures (the upstream went away, or a restart failed)… */
  readonly maxFailures: number;
  /** …within this long (ms). */
  readonly windowMs: number;
}

/**
 * The default {@link RestartPolicy}: 100 ms, doubling to 10 s; stable after 30 s; given up after
 * 8 failures within a minute (with the waits, about 13 s of an upstream that never stays up).
 */
export const DEFAULT_RESTART_POLICY: RestartPolicy = Object.freeze({
  initialDelayMs: 100,
  maxDelayMs: 10_000,
  stableMs: 30_000,
  maxFailures: 8,
  windowMs: 60_000,
});

/** How long a URL upstream gets to answer a ping when a request to it failed (ms). */
const PROBE_TIMEOUT_MS = 10_000;

/**
 * `policy` completed with {@link DEFAULT_RESTART_POLICY}; throws, naming the field, when a value
 * is not a whole number of milliseconds (or failures) of at least 1.
 */
export function restartPolicy(policy: Partial<RestartPolicy> | undefined): RestartPolicy {
  const merged = { ...DEFAULT_RESTART_POLICY, ...policy };
  for (const key of Object.keys(DEFAULT_RESTART_POLICY) as (keyof RestartPolicy)[]) {
    const value: unknown = merged[key];
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
      throw new InvalidArgumentError(
        'restart',
        `restart.${key} must be a whole number of at least 1, not ${String(value)}`,
      );
    }
  }
  if (merged.maxDelayMs < merged.initialDelayMs) {
    throw new InvalidArgumentError(
      'restart',
      `restart.maxDelayMs (${merged.maxDelayMs}) is less than restart.initialDelayMs (${merged.initialDelayMs})`,
    );
  }
  return merged;
}

/** What a link is doing: `up`, `restarting` (waiting, or connecting again), `stopped` (given up) or `closed` (the session ended). */
export type LinkState = 'up' | 'restarting' | 'stopped' | 'closed';

/** Options of {@link UpstreamLink}. */
export interface UpstreamLinkOptions {
  /** The session's id, for the operator's messages (read when a message is written). */
  readonly session: () => string;
  readonly policy: RestartPolicy;
  /** Connects a new client to the same upstream (a new process, or a new HTTP session). */
  readonly connect: () => Promise<UpstreamConnection>;
  /** The upstream went away: its tools are no longer to be offered. */
  readonly onDown: (link: UpstreamLink) => void;
  /** The upstream is back, on a new client. */
  readonly onUp: (link: UpstreamLink) => Promise<void>;
  /** A line for the operator (stderr). */
  readonly report: (message: string) => void;
  /** The clock (ms), for tests. */
  readonly now?: (() => number) | undefined;
}

/** One session's upstream, restarted when it goes away (see the module comment). */
export class UpstreamLink implements UpstreamConnection {
  readonly spec: UpstreamSpec;
  readonly prefix: string;
  /** The tools it listed last: kept while it is down, so the session knows whose tools those are. */
  tools: Tool[] = [];
  readonly #options: UpstreamLinkOptions;
  readonly #now: () => number;
  #client: Client;
  #state: LinkState = 'up';
  /** When the current client connected. */
  #startedAt: number;
  /** Failures in a row since the upstream last ran stably: the next wait is `initialDelayMs * 2^attempt`. */
  #attempt = 0;
  /** When each recent failure happened (within the policy's window). */
  #failures: number[] = [];
  #restarts = 0;
  /** Why it went down last, for messages: "exited", "stopped answering…". */
  #why = '';
  #timer: ReturnType<typeof setTimeout> | undefined;
  #probe: Promise<boolean> | undefined;

  constructor(first: UpstreamConnection, options: UpstreamLinkOptions) {
    this.spec = first.spec;
    this.prefix = first.prefix;
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#client = first.client;
    this.#startedAt = this.#now();
    this.#watch(first.client);
  }

  /** The client of the current connection (a closed one while the upstream is down). */
  get client(): Client {
    return this.#client;
  }

  /** True while requests can be sent: the upstream is up and its client connected. */
  get available(): boolean {
    return this.#state === 'up' && this.#client.transport !== undefined;
  }

  /** What it is doing now (see {@link LinkState}). */
  get state(): LinkState {
    return this.#state;
  }

  /** How many times it was restarted. */
  get restarts(): number {
    return this.#restarts;
  }

  /** The upstream as the operator's messages name it: `session "…": upstream "…"`. */
  get label(): string {
    return `session "${this.#options.session()}": upstream "${describeUpstream(this.spec)}"`;
  }

  /** Why nothing can be sent to it now, for the client: what happened and what is being done. */
  unavailable(): string {
    const upstream = `the upstream MCP server "${describeUpstream(this.spec)}"`;
    switch (this.#state) {
      case 'up':
        return `${upstream} is not connected`;
      case 'restarting':
        return `${upstream} ${this.#why} and is ${this.#words.restarting}; try again in a moment`;
      case 'stopped':
        return `${upstream} ${this.#why} and is not ${this.#words.restarted} again (it failed ${this.#options.policy.maxFailures} times within ${seconds(this.#options.policy.windowMs)}); reconnect to try again`;
      case 'closed':
        return `${upstream} was let go: the session is closed`;
    }
  }

  /**
   * After a request to it failed with `error`: resolves to whether the upstream is still up. A
   * spawned upstream that exited closes its connection, which is seen by itself; a URL upstream
   * that went away only makes requests fail, so a failure that is no answer of the upstream's
   * (a network error, an HTTP status, a timeout, a closed stream) is checked with a ping, and
   * an upstream that does not answer it is connected again.
   */
  verify(error: unknown): Promise<boolean> {
    if (this.#state !== 'up') return Promise.resolve(false);
    if (!('url' in this.spec) || isAnswer(error)) return Promise.resolve(this.available);
    if (this.#probe !== undefined) return this.#probe;
    const client = this.#client;
    const probe = client.ping({ timeout: PROBE_TIMEOUT_MS }).then(
      () => true,
      (failure: unknown) => {
        if (client === this.#client) this.#down(`stopped answering (${messageOf(error)}; then ${messageOf(failure)})`);
        return false;
      },
    );
    this.#probe = probe.finally(() => {
      this.#probe = undefined;
    });
    return this.#probe;
  }

  /** Lets go of the upstream for good (the session ends): no restart after this. */
  async close(): Promise<void> {
    this.#state = 'closed';
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#client.close();
  }

  /** A spawned upstream is restarted (a new process); a URL one is reconnected (a new HTTP session). */
  get #words(): { restart: string; restarting: string; restarted: string } {
    return 'url' in this.spec
      ? { restart: 'reconnect', restarting: 'reconnecting', restarted: 'reconnected' }
      : { restart: 'restart', restarting: 'restarting', restarted: 'restarted' };
  }

  #watch(client: Client): void {
    client.onclose = () => {
      if (client === this.#client) this.#down('url' in this.spec ? 'closed its connection' : 'exited');
    };
    // A URL upstream's transport reports a broken stream here and nowhere else.
    if ('url' in this.spec) {
      client.onerror = (error) => {
        if (client === this.#client) void this.verify(error);
      };
    }
  }

  #down(why: string): void {
    if (this.#state !== 'up') return;
    const now = this.#now();
    if (now - this.#startedAt >= this.#options.policy.stableMs) {
      this.#attempt = 0;
      this.#failures = [];
    }
    this.#state = 'restarting';
    this.#why = why;
    // A URL upstream's client is still open: closing it ends the calls waiting on it now, as a
    // spawned upstream's exit does (they may have run: their reservations count, "abandoned").
    void this.#client.close().catch(() => undefined);
    this.#options.onDown(this);
    this.#failed(now, why);
  }

  /** Counts a failure, then restarts after the backoff, or gives up. */
  #failed(now: number, why: string): void {
    const { policy } = this.#options;
    this.#failures = this.#failures.filter((at) => now - at < policy.windowMs);
    this.#failures.push(now);
    if (this.#failures.length >= policy.maxFailures) {
      this.#state = 'stopped';
      this.#options.report(
        `${this.label} ${why}; it failed ${this.#failures.length} times within ${seconds(policy.windowMs)}, so it is not ${this.#words.restarted} again: its tools stay unavailable to this session until the client reconnects`,
      );
      return;
    }
    const delay = Math.min(policy.initialDelayMs * 2 ** this.#attempt, policy.maxDelayMs);
    this.#attempt++;
    this.#options.report(`${this.label} ${why}; ${this.#words.restarting} it in ${delay} ms`);
    this.#timer = setTimeout(() => void this.#restart(), delay);
  }

  async #restart(): Promise<void> {
    this.#timer = undefined;
    if (this.#state !== 'restarting') return;
    let connection: UpstreamConnection;
    try {
      connection = await this.#options.connect();
    } catch (error) {
      if (this.#state !== 'restarting') return;
      this.#why = `could not be ${this.#words.restarted} (${messageOf(error)})`;
      this.#failed(this.#now(), this.#why);
      return;
    }
    if (this.#state !== 'restarting') {
      // The session closed while it connected.
      await connection.client.close().catch(() => undefined);
      return;
    }
    this.#client = connection.client;
    this.#watch(connection.client);
    this.#startedAt = this.#now();
    this.#restarts++;
    this.#state = 'up';
    this.#options.report(`${this.label} is back (${this.#words.restart} ${this.#restarts})`);
    await this.#options
      .onUp(this)
      .catch((error: unknown) => this.#options.report(`${this.label}: ${messageOf(error)}`));
  }
}

/**
 * True for an error the upstream answered with (a JSON-RPC error it sent): the connection
 * works. The MCP client's own codes for no answer (the connection closed, the bound passed)
 * and anything that is not a JSON-RPC error (a network error, an HTTP status) are not.
 */
function isAnswer(error: unknown): boolean {
  return (
    error instanceof McpError && error.code !== ErrorCode.ConnectionClosed && error.code !== ErrorCode.RequestTimeout
  );
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
