/**
 * The MCP gateway (`baton mcp`): an MCP server in front of one or more upstream MCP servers that
 * applies a template's steps, sequences and rules to their tools (SPEC section 10).
 *
 * One {@link GatewaySession} per downstream MCP session (a stdio connection, or an `Mcp-Session-Id`
 * over HTTP), with its own upstream connections, so each client sees its upstream as it would
 * directly (its roots, its log level, its subscriptions), and its own orchestration session:
 *
 * - `tools/list` answers the tools the active step allows now, read from the store, with the
 *   upstream's definitions unchanged; `notifications/tools/list_changed` goes out when a call this
 *   session made changes that set;
 * - `tools/call` is one `Turn` request (decide and reserve in one atomic store update, the call id
 *   an idempotency key, the lease renewed while the upstream runs), then the upstream call, then
 *   its completion (an `isError` result, an error, a timeout or a cancellation releases it
 *   instead): a refused call never reaches the upstream, and gets a tool error result with the
 *   reason the AI SDK loop gives;
 * - everything else (resources, prompts, completions, logging, progress, cancellation, requests
 *   from the upstream such as roots or sampling) is passed through with the SDK's own client and
 *   server, never hand-written JSON-RPC;
 * - an upstream that goes away (a spawned one exits, a URL one stops answering) is restarted with
 *   backoff by the session's {@link UpstreamLink}: its tools leave the list while it is down and
 *   come back with it (the client hears of both), and what is sent to it meanwhile is answered
 *   at once with why.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  CallToolResultSchema,
  type ClientCapabilities,
  ErrorCode,
  isInitializeRequest,
  type JSONRPCMessage,
  ListToolsRequestSchema,
  McpError,
  type Notification,
  type Progress,
  type Request,
  ResultSchema,
  type ServerCapabilities,
  SetLevelRequestSchema,
  type Tool,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { inputDigest } from '../ai-sdk/input-digest.js';
import type { OrchestrationPlan } from '../core/compile.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { createState, type OrchestrationState } from '../core/state.js';
import { selectTools, type ToolAnnotations } from '../core/tool-annotations.js';
import { type StepDecision, type ToolDecision, transition } from '../core/transition.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { rejectionMessage } from '../orchestration/rejection-message.js';
import { callIdKey, Turn } from '../orchestration/turn.js';
import type { TurnLimiter } from '../server/turn-limiter.js';
import { hintsOf, sameHints, widening, withHints } from './gateway-annotations.js';
import { type RestartPolicy, restartPolicy, UpstreamLink } from './gateway-link.js';
import { routeMany } from './gateway-routing.js';
import { messageDependencies } from './gateway-template.js';
import {
  checkUpstreams,
  connectUpstream,
  describeUpstream,
  listUpstreamTools,
  messageOf,
  type UpstreamConnection,
  type UpstreamSpec,
} from './gateway-upstream.js';
import { mcpResultValue } from './mcp-result.js';

/** Default bound of one upstream call (ms); progress notifications restart it. */
export const DEFAULT_CALL_TIMEOUT_MS = 60_000;
/** Least time an upstream gets to start and answer `initialize` (ms), whatever the call timeout. */
const CONNECT_TIMEOUT_MS = 60_000;
/** Messages a session holds while its upstreams connect (what a client sends before `initialize` completes). */
const MAX_QUEUED_MESSAGES = 1_000;
/** How long a person may take to answer an approval asked through MCP elicitation (ms). */
export const APPROVAL_TIMEOUT_MS = 10 * 60_000;
/**
 * Longest call input (JSON characters) shown to a person for approval. The whole input is shown
 * or the person is not asked: a clipped one would let a model put what matters (an amount, a
 * path) past the cut, behind padding, and have it approved unseen.
 */
export const MAX_APPROVAL_INPUT_CHARS = 10_000;

/** Options of {@link McpGateway}. */
export interface McpGatewayOptions {
  /** The validated template whose steps and rules apply. */
  template: AgentTemplate;
  /** The upstream servers (several need names; their tools become `name__tool`). */
  upstreams: readonly UpstreamSpec[];
  /** Keeps the sessions' state (any store). */
  manager: OrchestrationManager;
  /** Bound of one upstream request in ms (default {@link DEFAULT_CALL_TIMEOUT_MS}); progress restarts it. */
  callTimeoutMs?: number | undefined;
  /**
   * Re-read each session this often (ms) and announce a changed tool list: for changes other
   * processes make to a shared session (another gateway on the same `--session`, a reset through
   * the HTTP API). Default 0: only this session's own calls announce changes.
   */
  watchMs?: number | undefined;
  /**
   * Environment spawned upstreams start from (default: this process's), without the lower-case
   * `npm_*` variables npm and npx set for the gateway when they launched it: they describe how
   * the gateway was started, and would tell an upstream started with `npx` to run something else.
   */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** Where spawned upstreams' stderr goes (default `inherit`). */
  upstreamStderr?: 'inherit' | 'ignore' | undefined;
  /**
   * Receives what no client request can be told of, for the operator: failures (a store write
   * after a call, an upstream that closed) and what the gateway did about them or instead of
   * what an upstream asked (a restart, an ignored re-declaration of a tool's annotations).
   */
  onError?: ((error: unknown) => void) | undefined;
  /** Reported to clients as the server's version. */
  version?: string | undefined;
  /** Admission control of tool calls (`baton serve`'s turn limiter): a call waits for a slot. */
  limiter?: TurnLimiter | undefined;
  /**
   * Take every re-declaration of a tool's annotations an upstream makes mid-session (default
   * false): a session judges each tool by what it first declared, and ignores a later
   * declaration that would let the template offer or allow the tool more (an upstream that
   * re-declares a writing tool read-only would widen a `@readOnly` template as it pleased).
   */
  trustAnnotationChanges?: boolean | undefined;
  /**
   * How a session's upstream that went away (a spawned one exited, a URL one stopped answering)
   * is connected again; default {@link DEFAULT_RESTART_POLICY} (100 ms doubling to 10 s, given up
   * after 8 failures within a minute). Each field is a whole number of at least 1.
   */
  restart?: Partial<RestartPolicy> | undefined;
}

/** Options of {@link McpGateway.connect}. */
export interface GatewaySessionOptions {
  /** The orchestration session (default: a new id per connection, or the transport's session id). */
  sessionId?: string | undefined;
  /** Called once the session's upstreams are connected and the client initialized. */
  onReady?: ((session: GatewaySession) => void) | undefined;
  /** Called when the downstream connection closed and the session let go of its upstreams. */
  onClosed?: ((session: GatewaySession) => void) | undefined;
}

/** The gateway refuses its template or upstreams: what is wrong, said before anything runs. */
export class GatewaySetupError extends InvalidArgumentError {
  constructor(message: string) {
    super('template', message);
    this.name = 'GatewaySetupError';
  }
}

/**
 * The gateway: one per template and set of upstreams, serving any number of MCP sessions (see
 * the module comment).
 *
 * @example
 * ```ts
 * import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
 * import { createOrchestrationManager } from 'baton-agents';
 * import { McpGateway } from 'baton-agents/mcp';
 *
 * const gateway = new McpGateway({
 *   template, // a validated template (validateTemplate(), loadTemplate())
 *   upstreams: [{ command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/tmp/work'] }],
 *   manager: createOrchestrationManager({ store: 'redis://127.0.0.1:6379' }),
 * });
 * await gateway.connect(new StdioServerTransport());
 * ```
 */
export class McpGateway {
  readonly template: AgentTemplate;
  readonly upstreams: readonly UpstreamSpec[];
  readonly manager: OrchestrationManager;
  readonly callTimeoutMs: number;
  /** The agent that gateway sessions belong to (the template's id). */
  readonly agentId: string | undefined;
  readonly #options: McpGatewayOptions;
  readonly #sessions = new Set<GatewaySession>();
  /** @internal */
  readonly restartPolicy: RestartPolicy;

  constructor(options: McpGatewayOptions) {
    this.#options = options;
    this.template = options.template;
    this.upstreams = checkUpstreams(options.upstreams);
    this.restartPolicy = restartPolicy(options.restart);
    this.manager = options.manager;
    const dependencies = messageDependencies(options.template);
    if (dependencies.length > 0) {
      throw new GatewaySetupError(
        `an MCP gateway sees tool calls but no conversation, so what waits for a user message would never happen; this template depends on one in: ${dependencies.join('; ')}. Use tool_used or custom conditions, or serve it with "baton serve"`,
      );
    }
    // Compiled now, so a template the engine refuses fails at start (sessions compile it again
    // with what their upstreams declare, for annotation selectors).
    options.manager.plan(options.template);
    this.callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    this.agentId = options.template.id ?? options.template.agentId;
  }

  /** @internal */
  get watchMs(): number {
    return this.#options.watchMs ?? 0;
  }

  /** @internal */
  get trustAnnotationChanges(): boolean {
    return this.#options.trustAnnotationChanges === true;
  }

  /** @internal */
  get limiter(): TurnLimiter | undefined {
    return this.#options.limiter;
  }

  /** The sessions open now. */
  get sessions(): ReadonlySet<GatewaySession> {
    return this.#sessions;
  }

  /**
   * Connects to the upstreams once, lists their tools and lets go again: what a session would
   * offer (before any step applies) and what the template hides. For startup checks.
   */
  async probe(): Promise<{ offered: Tool[]; hidden: string[] }> {
    const upstreams = await this.connectUpstreams({}, () => undefined);
    try {
      const tools = await this.listTools(upstreams);
      const offered = selectTools(this.template, declared(tools));
      const shown = new Set(offered);
      return {
        offered: offered.map((name) => tools.get(name)!.tool),
        hidden: [...tools.keys()].filter((name) => !shown.has(name)),
      };
    } finally {
      await Promise.allSettled(upstreams.map((upstream) => upstream.client.close()));
    }
  }

  /**
   * Serves one downstream MCP connection on `transport` (not started yet): the session starts when
   * the client's `initialize` arrives, connecting the upstreams with the client's capabilities.
   */
  async connect(transport: Transport, options: GatewaySessionOptions = {}): Promise<GatewaySession> {
    const session = new GatewaySession(this, transport, options, () => this.#sessions.delete(session));
    this.#sessions.add(session);
    await session.start();
    return session;
  }

  /** Closes every session and its upstreams. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#sessions].map((session) => session.close()));
  }

  /** @internal Connects every upstream, declaring `capabilities` as the gateway's own. */
  async connectUpstreams(
    capabilities: ClientCapabilities,
    prepare: (client: Client, index: number) => void,
  ): Promise<UpstreamConnection[]> {
    const settled = await Promise.allSettled(
      this.upstreams.map((_spec, index) => this.connectUpstream(index, capabilities, prepare)),
    );
    const failed = settled.find((result) => result.status === 'rejected');
    if (failed !== undefined) {
      await Promise.allSettled(
        settled.flatMap((result) => (result.status === 'fulfilled' ? [result.value.client.close()] : [])),
      );
      throw failed.reason;
    }
    return settled.map((result) => (result as PromiseFulfilledResult<UpstreamConnection>).value);
  }

  /** @internal Connects the upstream at `index` (at a session's start, or again after it went away). */
  connectUpstream(
    index: number,
    capabilities: ClientCapabilities,
    prepare: (client: Client, index: number) => void,
  ): Promise<UpstreamConnection> {
    return connectUpstream(this.upstreams[index]!, this.upstreams.length > 1, {
      capabilities,
      env: this.#options.env,
      stderr: this.#options.upstreamStderr,
      // Starting an upstream is not a call: `npx -y` may download it first, so a tight
      // --call-timeout (meant for tools/call) must not stop the gateway from starting.
      timeoutMs: Math.max(this.callTimeoutMs, CONNECT_TIMEOUT_MS),
      version: this.version,
      prepare: (client) => prepare(client, index),
    });
  }

  /** @internal Every upstream tool by its downstream name. */
  async listTools(upstreams: readonly UpstreamConnection[]): Promise<Map<string, ExposedTool>> {
    const lists = await Promise.all(upstreams.map((upstream) => listUpstreamTools(upstream, this.callTimeoutMs)));
    return exposedTools(upstreams, lists);
  }

  /** @internal */
  get version(): string {
    return this.#options.version ?? '0.0.0';
  }

  /** @internal */
  reportError(error: unknown): void {
    (this.#options.onError ?? ((e: unknown) => console.error('[baton mcp]', e)))(error);
  }
}

/** An upstream tool as the gateway offers it. */
export interface ExposedTool {
  /** Its downstream name (`name__tool` with several upstreams). */
  readonly name: string;
  readonly upstream: UpstreamConnection;
  /** The upstream's definition, under the downstream name. */
  readonly tool: Tool;
}

/** The tools of `lists` (one per upstream, in order) by their downstream names; the first upstream to list a name has it. */
function exposedTools(
  upstreams: readonly UpstreamConnection[],
  lists: readonly (readonly Tool[])[],
): Map<string, ExposedTool> {
  const tools = new Map<string, ExposedTool>();
  lists.forEach((list, i) => {
    const upstream = upstreams[i]!;
    for (const tool of list) {
      const name = `${upstream.prefix}${tool.name}`;
      if (!tools.has(name)) tools.set(name, { name, upstream, tool: { ...tool, name } });
    }
  });
  return tools;
}

function declared(tools: ReadonlyMap<string, ExposedTool>) {
  return [...tools.values()].map(({ name, tool }) => ({ name, annotations: tool.annotations }));
}

/** The original name of an exposed tool at its upstream. */
function upstreamName(exposed: ExposedTool): string {
  return exposed.upstream.prefix === '' ? exposed.name : exposed.name.slice(exposed.upstream.prefix.length);
}

/** One downstream MCP session; see the module comment. */
export class GatewaySession {
  readonly gateway: McpGateway;
  /** The orchestration session id (set when the client initializes, for HTTP: its `Mcp-Session-Id`). */
  sessionId: string;
  readonly #inner: Transport;
  readonly #options: GatewaySessionOptions;
  readonly #forget: () => void;
  /** Distinguishes this connection's request ids from another connection's on the same session. */
  readonly #connection = randomUUID().slice(0, 8);
  #server: Server | undefined;
  #upstreams: UpstreamLink[] = [];
  /** The log level the client last set, for an upstream that restarts. */
  #logLevel: Request | undefined;
  #tools = new Map<string, ExposedTool>();
  #agentTools: readonly string[] = [];
  /** The hints each tool is judged by in this session (see {@link GatewaySession.#judge}), kept for the session's life. */
  readonly #pinned = new Map<string, ToolAnnotations>();
  /** Tools whose ignored re-declaration the operator was told of. */
  readonly #ignoredRedeclarations = new Set<string>();
  /** The template compiled with what the upstream tools declare (annotation selectors). */
  #plan: OrchestrationPlan | undefined;
  #annotationsKey = '';
  #turn: Turn | undefined;
  /** The tools the client was last told of: a change is announced with `tools/list_changed`. */
  #advertised: string | undefined;
  /**
   * Numbers the reads that judge the tool list (a `tools/list`, a re-read, a call's write), in
   * the order they start, and the latest one whose answer was taken: a read that started before
   * a newer one was taken ended late with a state since replaced, and is dropped, or the client
   * would be told of the old set and then of the new one again.
   */
  #reads = 0;
  #judged = 0;
  /** A call changed the session while others ran: the last one to end announces the tools. */
  #owed = false;
  #queue: { message: JSONRPCMessage; extra: unknown }[] = [];
  #opening: Promise<void> | undefined;
  #closed = false;
  /** Calls running now: a closing session waits for them to be released. */
  readonly #running = new Set<Promise<unknown>>();
  #watcher: ReturnType<typeof setInterval> | undefined;
  /** Resolves once the client sent `notifications/initialized` (or the session closed). */
  readonly #initialized: Promise<void>;
  #initializedNow: () => void = () => undefined;
  /** With several upstreams: which one listed each resource URI. */
  readonly #resourceOwners = new Map<string, UpstreamConnection>();

  constructor(gateway: McpGateway, transport: Transport, options: GatewaySessionOptions, forget: () => void) {
    this.gateway = gateway;
    this.#inner = transport;
    this.#options = options;
    this.#forget = forget;
    this.sessionId = options.sessionId ?? `mcp-${randomUUID()}`;
    this.#initialized = new Promise((resolve) => {
      this.#initializedNow = resolve;
    });
  }

  /** The upstream tools this session may offer at all (the template's selection), in order. */
  get agentTools(): readonly string[] {
    return this.#agentTools;
  }

  /** @internal Starts reading the downstream transport; messages wait until the session is open. */
  async start(): Promise<void> {
    this.#inner.onmessage = (message, extra) => {
      if (this.#server !== undefined && this.#queue.length === 0) return this.#deliver(message, extra);
      // Until the client initializes, what it sends waits here; a client that floods instead is let go.
      if (this.#queue.length >= MAX_QUEUED_MESSAGES) return void this.close();
      this.#queue.push({ message, extra });
      if (this.#opening === undefined && isInitializeRequest(message)) {
        this.#opening = this.#open(message.params.capabilities).then(
          () => this.#drain(),
          (error: unknown) => this.#refuse((message as { id: string | number }).id, error),
        );
      }
    };
    this.#inner.onclose = () => void this.close();
    this.#inner.onerror = (error) => this.gateway.reportError(error);
    await this.#inner.start();
  }

  #relay: { onmessage?: Transport['onmessage'] } = {};

  #deliver(message: JSONRPCMessage, extra: unknown): void {
    this.#relay.onmessage?.(message, extra as Parameters<NonNullable<Transport['onmessage']>>[1]);
  }

  #drain(): void {
    const queued = this.#queue;
    this.#queue = [];
    for (const { message, extra } of queued) this.#deliver(message, extra);
  }

  /** The upstreams could not be reached: the client's `initialize` gets the error, and the connection ends. */
  async #refuse(id: string | number, error: unknown): Promise<void> {
    this.gateway.reportError(error);
    await this.#inner
      .send({ jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message: messageOf(error) } })
      .catch(() => undefined);
    await this.close();
  }

  /** Connects the upstreams with the client's capabilities, then the downstream server. */
  async #open(capabilities: ClientCapabilities): Promise<void> {
    if (this.#inner.sessionId !== undefined && this.#options.sessionId === undefined)
      this.sessionId = this.#inner.sessionId; // over HTTP: the Mcp-Session-Id, for the session routes
    const forwarded: ClientCapabilities = {};
    if (capabilities.roots !== undefined) forwarded.roots = capabilities.roots;
    if (capabilities.sampling !== undefined) forwarded.sampling = capabilities.sampling;
    if (capabilities.elicitation !== undefined) forwarded.elicitation = capabilities.elicitation;
    const upstreams = await this.gateway.connectUpstreams(forwarded, (client, index) => this.#prepare(client, index));
    if (this.#closed) {
      // The client left while they were starting (an HTTP DELETE, an idle sweep, stdin closed):
      // close() found no upstreams to close, so they are let go here, or each would stay
      // running, one process per abandoned handshake.
      await Promise.allSettled(upstreams.map((upstream) => upstream.client.close()));
      return;
    }
    this.#upstreams = upstreams.map(
      (connection, index) =>
        new UpstreamLink(connection, {
          session: () => this.sessionId,
          policy: this.gateway.restartPolicy,
          connect: () => this.gateway.connectUpstream(index, forwarded, (client, at) => this.#prepare(client, at)),
          onDown: () => this.#toolsChanged(),
          onUp: (link) => this.#back(link),
          report: (message) => this.gateway.reportError(new Error(message)),
        }),
    );
    await this.#refreshTools();
    // Claims the session for the template's agent (the session routes show it as one of its
    // sessions), and refuses a session of another agent before anything runs.
    const begun = await this.#turn!.begin();
    if (this.#closed) return; // its upstreams were closed with it
    // What the client will be offered at its first tools/list: a re-read (--watch) that finds the
    // same set before the client lists has nothing to announce.
    this.#advertised = this.#offered(this.#allowedOn(begun)).join('\n');
    const server = new Server(
      { name: 'baton-mcp-gateway', version: this.gateway.version },
      { capabilities: this.#capabilities(), ...this.#instructions() },
    );
    this.#server = server;
    this.#install(server);
    // The server reads and writes through a relay: the real transport is already started.
    const relay = this.#relay;
    const inner = this.#inner;
    const wrapped: Transport = {
      start: async () => undefined,
      send: (message, options) => inner.send(message, options),
      close: () => inner.close(),
      set onmessage(handler) {
        relay.onmessage = handler;
      },
      get onmessage() {
        return relay.onmessage;
      },
      get sessionId() {
        return inner.sessionId;
      },
      setProtocolVersion: (version) => inner.setProtocolVersion?.(version),
    };
    await server.connect(wrapped);
    // The inner transport's close and errors stay with the session.
    this.#inner.onclose = () => void this.close();
    this.#inner.onerror = (error) => this.gateway.reportError(error);
    server.oninitialized = () => {
      this.#initializedNow();
      this.#watch();
      this.#options.onReady?.(this);
    };
  }

  /** Polls the store for changes made elsewhere (see {@link McpGatewayOptions.watchMs}). */
  #watch(): void {
    const every = this.gateway.watchMs;
    if (every <= 0) return;
    let busy = false;
    this.#watcher = setInterval(() => {
      if (busy || this.#running.size > 0) return;
      busy = true;
      this.#announce()
        .catch((error: unknown) => this.gateway.reportError(error))
        .finally(() => {
          busy = false;
        });
    }, every);
    this.#watcher.unref?.();
  }

  /** Handlers of what the upstream sends: requests go to the client, notifications are passed on. */
  #prepare(client: Client, index: number): void {
    client.fallbackRequestHandler = async (request, extra) => {
      // An upstream may ask as soon as it is initialized (the filesystem server asks for the
      // roots), before the client has finished its own initialization: the request waits for it.
      await this.#initialized;
      const server = this.#server;
      if (server === undefined || this.#closed)
        throw new McpError(ErrorCode.InternalError, 'the downstream client is not connected');
      return server.request(request as Request, ResultSchema, { signal: extra.signal, timeout: APPROVAL_TIMEOUT_MS });
    };
    client.fallbackNotificationHandler = async (notification: Notification) => {
      await this.#server?.notification(notification);
    };
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      // A client replaced by a restart may still deliver what it read before it closed.
      if (this.#upstreams[index]?.client !== client) return;
      await this.#refreshTools();
      await this.#announce();
    });
    // When the upstream goes away is the session's UpstreamLink's to see (it sets onclose).
  }

  /**
   * The tools on offer changed without a call of the session (an upstream went away or came
   * back): the client hears of it now, or, while calls run, when the last one ends (see #settle).
   */
  #toolsChanged(): void {
    if (this.#running.size > 0) {
      this.#owed = true;
      return;
    }
    this.#announce().catch((error: unknown) => this.gateway.reportError(error));
  }

  /** An upstream is back after a restart: its tools are listed again, and the client's log level is set there again. */
  async #back(link: UpstreamLink): Promise<void> {
    if (this.#logLevel !== undefined && link.client.getServerCapabilities()?.logging !== undefined) {
      await link.client
        .request(this.#logLevel, ResultSchema, { timeout: this.gateway.callTimeoutMs })
        .catch((error: unknown) => this.gateway.reportError(error));
    }
    await this.#refreshTools();
    this.#toolsChanged();
  }

  /** The capabilities the downstream client is told of: tools, and what the upstreams offer besides. */
  #capabilities(): ServerCapabilities {
    const capabilities: ServerCapabilities = { tools: { listChanged: true } };
    for (const upstream of this.#upstreams) {
      const theirs = upstream.client.getServerCapabilities() ?? {};
      if (theirs.resources) capabilities.resources = { ...capabilities.resources, ...theirs.resources };
      if (theirs.prompts) capabilities.prompts = { ...capabilities.prompts, ...theirs.prompts };
      if (theirs.completions) capabilities.completions = {};
      if (theirs.logging) capabilities.logging = {};
    }
    return capabilities;
  }

  #instructions(): { instructions?: string } {
    const instructions = this.#upstreams
      .map((upstream) => upstream.client.getInstructions())
      .filter((text): text is string => typeof text === 'string' && text !== '');
    return instructions.length > 0 ? { instructions: instructions.join('\n\n') } : {};
  }

  /**
   * Lists the tools of every upstream that is up again (one that is down keeps what it listed
   * last, so its tools stay known while they are not offered), then judges them.
   */
  async #refreshTools(): Promise<void> {
    await Promise.all(
      this.#upstreams.map(async (link) => {
        if (!link.available) return;
        try {
          link.tools = await listUpstreamTools(link, this.gateway.callTimeoutMs);
        } catch (error) {
          // Gone since (it restarts, and is listed again when it is back), or it answered wrongly.
          if (await link.verify(error)) this.gateway.reportError(error);
        }
      }),
    );
    this.#tools = this.#judge(
      exposedTools(
        this.#upstreams,
        this.#upstreams.map((link) => link.tools),
      ),
    );
    const tools = declared(this.#tools);
    const selected = selectTools(this.gateway.template, tools);
    const annotations = new Map<string, ToolAnnotations>(tools.map((tool) => [tool.name, hintsOf(tool.annotations)]));
    const key = JSON.stringify([...annotations]);
    if (
      this.#turn === undefined ||
      selected.join('\n') !== this.#agentTools.join('\n') ||
      key !== this.#annotationsKey
    ) {
      this.#agentTools = selected;
      this.#annotationsKey = key;

      // A new turn for the new tool list; calls running on the old one finish there.
      this.#turn = new Turn({
        manager: this.gateway.manager,
        config: this.gateway.template,
        toolAnnotations: annotations,
        sessionId: this.sessionId,
        agentTools: selected,
        agentId: this.gateway.agentId,
        onError: (error) => this.gateway.reportError(error),
      });
      this.#plan = this.#turn.plan;
    }
  }

  /**
   * The listed tools as this session judges them: each by the hints it declared when the session
   * first saw it, or by a later declaration that widens nothing (gateway-annotations.ts). A tool
   * whose re-declaration is ignored is offered with the hints it is judged by, and the operator
   * hears of it once per tool.
   */
  #judge(listed: Map<string, ExposedTool>): Map<string, ExposedTool> {
    for (const [name, exposed] of listed) {
      const declaredNow = hintsOf(exposed.tool.annotations);
      const pinned = this.#pinned.get(name);
      if (pinned === undefined || this.gateway.trustAnnotationChanges || sameHints(pinned, declaredNow)) {
        this.#pinned.set(name, declaredNow);
        continue;
      }
      const where = widening(this.gateway.template, name, pinned, declaredNow);
      if (where === undefined) {
        this.#pinned.set(name, declaredNow);
        continue;
      }
      listed.set(name, {
        ...exposed,
        tool: { ...exposed.tool, annotations: withHints(exposed.tool.annotations, pinned) },
      });
      if (this.#ignoredRedeclarations.has(name)) continue;
      this.#ignoredRedeclarations.add(name);
      this.gateway.reportError(
        new Error(
          `session "${this.sessionId}": upstream "${describeUpstream(exposed.upstream.spec)}" re-declared tool "${name}" as ${JSON.stringify(declaredNow)} after ${JSON.stringify(pinned)}; ignored, as it would widen what ${where} lets the tool do: the session goes on judging the tool by what it first declared (--trust-annotation-changes takes such changes)`,
        ),
      );
    }
    return listed;
  }

  #install(server: Server): void {
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      const read = ++this.#reads;
      const offered = this.#offered(await this.allowedTools());
      if (read > this.#judged) {
        this.#judged = read;
        this.#advertised = offered.join('\n');
      }
      return { tools: offered.map((name) => this.#tools.get(name)!.tool) };
    });
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const call = this.#admitted(request.params, extra);
      this.#running.add(call);
      try {
        return await call;
      } finally {
        this.#running.delete(call);
        // A change an earlier call made while this one ran was held back (see #settle); this call
        // may have ended without a write of its own to announce it (refused, say), so the last
        // call out says it.
        if (this.#running.size === 0 && this.#owed) {
          this.#owed = false;
          await this.#announce().catch((error: unknown) => this.gateway.reportError(error));
        }
      }
    });
    // Everything else goes to the upstream that serves it. The SDK's server answers
    // logging/setLevel itself when it declares logging: here the upstreams must hear it.
    server.fallbackRequestHandler = (request, extra) =>
      this.#passThrough(request as Request, extra).catch((error: unknown) => {
        throw relayed(error);
      });
    // What the client announces (its roots changed, say) is the upstreams' to hear.
    server.fallbackNotificationHandler = async (notification) => {
      const up = this.#upstreams.filter((upstream) => upstream.available);
      await Promise.allSettled(up.map((upstream) => upstream.client.notification(notification)));
    };
    if (this.#capabilities().logging !== undefined) {
      server.setRequestHandler(SetLevelRequestSchema, (request, extra) =>
        this.#setLevel(request, extra).catch((error: unknown) => {
          throw relayed(error);
        }),
      );
    }
  }

  /**
   * The tools the active step allows now, decided as a model step would be on the session as
   * the store holds it (a read, no write): what `tools/list` answers.
   */
  async allowedTools(): Promise<readonly string[]> {
    const manager = this.gateway.manager;
    const states = manager.getStateManager();
    const stored = await states.getState(this.sessionId);
    return this.#allowedOn(stored ?? createState(this.sessionId, states.clock(), states.ttl));
  }

  /**
   * Of the tools the step allows, those the session can offer now: not those of an upstream that
   * is down (they come back with it, and the client hears of both).
   */
  #offered(allowed: readonly string[]): readonly string[] {
    return allowed.filter((name) => this.#tools.get(name)?.upstream.available !== false);
  }

  #allowedOn(state: OrchestrationState): readonly string[] {
    const result = transition(
      this.#plan!,
      state,
      { type: 'step-started', agentTools: this.#agentTools },
      this.gateway.manager.transitionContext(undefined),
    );
    return (result.decision as StepDecision).allowedTools;
  }

  /** Tells the client its tool list changed, when the allowed set differs from what it was told. */
  async #announce(state?: OrchestrationState): Promise<void> {
    const server = this.#server;
    if (server === undefined || this.#closed) return;
    const read = ++this.#reads;
    const allowed = this.#offered(state === undefined ? await this.allowedTools() : this.#allowedOn(state)).join('\n');
    if (read < this.#judged) return;
    this.#judged = read;
    if (allowed === this.#advertised) return;
    this.#advertised = allowed;
    await server.sendToolListChanged().catch((error: unknown) => this.gateway.reportError(error));
  }

  /** A call through the admission control, when the gateway has one: it waits for a slot. */
  async #admitted(params: CallParams, extra: RequestExtra): Promise<CallToolResult> {
    const limiter = this.gateway.limiter;
    if (limiter === undefined) return this.#call(params, extra);
    let release: () => void;
    try {
      release = await limiter.acquire(extra.signal);
    } catch (error) {
      return toolError(`Tool "${params.name}" was not run: ${messageOf(error)}`);
    }
    try {
      return await this.#call(params, extra);
    } finally {
      release();
    }
  }

  async #call(params: CallParams, extra: RequestExtra): Promise<CallToolResult> {
    const turn = this.#turn;
    if (turn === undefined) throw new McpError(ErrorCode.InternalError, 'the session is not open');
    const name = params.name;
    const args = params.arguments ?? {};
    // The client chooses the request id: a long one is kept as a digest (see callIdKey).
    const toolCallId = `mcp-${this.#connection}-${callIdKey(String(extra.requestId))}`;
    const plan = turn.plan;
    // Rules read the input: the plan's, or the operator's limits across sessions.
    const read = plan.hasRules || (this.gateway.manager.policy?.scopes.length ?? 0) > 0;
    const digest = read ? inputDigest(args) : undefined;
    const call = read ? { args, argsDigest: digest } : {};
    let decision: ToolDecision = await turn.request(name, toolCallId, undefined, call);
    if (!decision.allowed && decision.reason.code === 'approval-required') {
      const approval = await this.#approve(turn, name, toolCallId, args, digest!, decision, extra);
      if (approval === DECLINED) return declined(name, decision);
      decision = approval;
    }
    if (!decision.allowed) return refused(name, decision);
    // The id the call was reserved under (an approved call has one of its own).
    const reserved = decision.toolCallId;
    const exposed = this.#tools.get(name);
    if (exposed === undefined) {
      // Allowed by the template but gone from the upstream since (it changed its tools).
      turn.failed(reserved);
      await this.#settle(turn);
      return toolError(`Tool "${name}" was not run: the upstream no longer offers it.`);
    }
    const link = exposed.upstream as UpstreamLink;
    if (!link.available) {
      // Never sent: released, not counted, and the client reads why and that it may try again.
      turn.failed(reserved);
      await this.#settle(turn);
      return toolError(`Tool "${name}" was not run: ${link.unavailable()}.`);
    }
    let result: CallToolResult;
    const progress = progressRelay(extra);
    try {
      const { progressToken: _token, ...meta } = params._meta ?? {};
      result = (await link.client.request(
        {
          method: 'tools/call',
          params: {
            name: upstreamName(exposed),
            arguments: args,
            ...(Object.keys(meta).length > 0 ? { _meta: meta } : {}),
          },
        },
        CallToolResultSchema,
        {
          signal: extra.signal,
          timeout: this.gateway.callTimeoutMs,
          resetTimeoutOnProgress: true,
          ...progress.options,
        },
      )) as CallToolResult;
      await progress.sent();
    } catch (error) {
      // Nothing is recorded and the reservation is released. A call whose answer never came (the
      // client cancelled or left, the bound passed, the upstream closed) may still have run: it
      // is counted by its limit rules, or a client cancelling each call once sent would get past
      // them. One the upstream answered with an error (or garbage) failed, and is not.
      // A URL upstream that went away only fails its requests: it is checked before the call is
      // counted, so a call it never answered counts as one.
      const up = await link.verify(error);
      if (extra.signal.aborted || isUnanswered(error) || !up) turn.abandoned(reserved);
      else turn.failed(reserved);
      await this.#settle(turn);
      const restarting = link.available ? '' : ` (${link.unavailable()})`;
      return toolError(`Tool "${name}" failed at the upstream MCP server: ${messageOf(error)}${restarting}`);
    }
    // A tool error result is a tool that failed: released, not recorded, as a tool that throws.
    if (result.isError === true) turn.failed(reserved);
    else if (plan.facts.length + plan.labels.length === 0) turn.completed(reserved);
    // The template's facts and labels read the result as its structured content or its JSON text.
    else turn.completed(reserved, { result: mcpResultValue(result), args });
    await this.#settle(turn);
    return result;
  }

  /** Writes the call's completion or release, then announces a changed tool list. */
  async #settle(turn: Turn): Promise<void> {
    let state: OrchestrationState | undefined;
    try {
      state = await turn.flush();
    } catch (error) {
      // The call already ran: its result still goes to the client. The turn keeps the write
      // and, when the store is only down, writes it again by itself as soon as it answers.
      this.gateway.reportError(error);
      return;
    }
    // Announced once the session's calls have all settled: while some still run, the allowed set
    // is what holds whichever way they end (narrower), and would flicker with every call.
    if (state === undefined) return;
    if (this.#running.size <= 1) {
      this.#owed = false;
      await this.#announce(state);
    } else {
      this.#owed = true;
    }
  }

  /**
   * An `approve` rule holds: a person is asked through MCP elicitation when the client can ask
   * one; the answer counts only for this call, its input and the session now. A person's decline
   * is recorded (`approval-declined`) and answered as such ({@link DECLINED}), so the model does
   * not ask again; without elicitation, or without an answer, the refusal stands
   * (`approval-required`) and says why no person approved.
   */
  async #approve(
    turn: Turn,
    name: string,
    toolCallId: string,
    args: Record<string, unknown>,
    digest: string,
    refusal: Extract<ToolDecision, { allowed: false }>,
    extra: RequestExtra,
  ): Promise<ToolDecision | typeof DECLINED> {
    const server = this.#server;
    if (refusal.reason.code !== 'approval-required') return refusal;
    const unapproved = (why: string) => ({
      ...refusal,
      reason: { ...refusal.reason, message: `${refusal.reason.message} (${why})` },
    });
    if (server?.getClientCapabilities()?.elicitation === undefined) {
      // Said so, or a model takes it for a person's no, or retries as if one might still come.
      return unapproved('no person was asked: this MCP client cannot ask one, as it does not support elicitation');
    }
    // The refused request's id is spent (a call id is decided once): the approval is asked, and
    // the approved call requested, under an id of its own, which the approval is bound to.
    const input = JSON.stringify(args);
    if (input.length > MAX_APPROVAL_INPUT_CHARS) {
      return unapproved(
        `no person was asked: the input, ${input.length} characters, is too long to show whole, and at most ${MAX_APPROVAL_INPUT_CHARS} are shown`,
      );
    }
    const approvalId = `${toolCallId}-approved`;
    turn.approvalRequested(name, approvalId, digest, refusal.reason.rule);
    await turn.flush();
    let action: 'accept' | 'decline' | 'cancel' | undefined;
    try {
      const answer = await server.elicitInput(
        {
          message: `Approve the call of "${name}" with ${input}? ${refusal.reason.message}`,
          requestedSchema: { type: 'object', properties: {} },
        },
        { signal: extra.signal, timeout: APPROVAL_TIMEOUT_MS },
      );
      action = answer.action;
    } catch (error) {
      this.gateway.reportError(error);
    }
    if (action === 'accept') {
      return turn.request(name, approvalId, undefined, { args, argsDigest: digest, approved: true });
    }
    if (action === 'decline') {
      // Written now, so the session's event log and the inspector show it at once; the same
      // approval id can then never be approved.
      turn.approvalDenied(approvalId);
      await turn.flush().catch((error: unknown) => this.gateway.reportError(error));
      return DECLINED;
    }
    // Dismissed (`cancel`), unanswered within APPROVAL_TIMEOUT_MS, or the client went away: no
    // one said no, so the call may be asked about again.
    return unapproved('the person asked gave no answer');
  }

  /** The client's log level goes to every upstream that logs. */
  async #setLevel(request: Request, extra: RequestExtra): Promise<Record<string, unknown>> {
    this.#logLevel = request;
    // One that is restarting hears the level when it is back (#back).
    const logging = this.#upstreams.filter(
      (upstream) => upstream.available && upstream.client.getServerCapabilities()?.logging,
    );
    await Promise.all(
      logging.map((upstream) =>
        upstream.client.request(request, ResultSchema, { signal: extra.signal, timeout: this.gateway.callTimeoutMs }),
      ),
    );
    return {};
  }

  /** A request the gateway does not decide: to the upstream that serves it. */
  async #passThrough(request: Request, extra: RequestExtra): Promise<Record<string, unknown>> {
    const send = async (upstream: UpstreamConnection, forwarded: Request) => {
      const link = upstream as UpstreamLink;
      if (!link.available) throw new McpError(ErrorCode.InternalError, `${capitalized(link.unavailable())}.`);
      const progress = progressRelay(extra);
      try {
        const result = await link.client.request(forwarded, ResultSchema, {
          signal: extra.signal,
          timeout: this.gateway.callTimeoutMs,
          resetTimeoutOnProgress: true,
          ...progress.options,
        });
        await progress.sent();
        return result;
      } catch (error) {
        await link.verify(error);
        throw error;
      }
    };
    if (this.#upstreams.length === 1) return send(this.#upstreams[0]!, request);
    return routeMany(this.#upstreams, request, this.#resourceOwners, send);
  }

  /** Ends the session: the downstream connection and the upstream ones. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#watcher !== undefined) clearInterval(this.#watcher);
    this.#initializedNow();
    this.#forget();
    // Closing the upstreams ends the calls running there; each is then released in the store
    // (not left to its lease) before the session lets go.
    await Promise.allSettled(this.#upstreams.map((upstream) => upstream.close()));
    await Promise.allSettled([...this.#running]);
    await (this.#server?.close() ?? this.#inner.close()).catch(() => undefined);
    this.#options.onClosed?.(this);
  }
}

/** The params of a `tools/call` request. */
interface CallParams {
  name: string;
  arguments?: Record<string, unknown> | undefined;
  _meta?: Record<string, unknown> | undefined;
}

/** What the SDK passes a request handler (the parts the gateway reads). */
interface RequestExtra {
  readonly signal: AbortSignal;
  readonly requestId: string | number;
  readonly _meta?: { progressToken?: string | number | undefined } | undefined;
  sendNotification(notification: { method: string; params?: Record<string, unknown> }): Promise<void>;
}

/**
 * Passes the upstream's progress of a request on to the client under the client's own token, in
 * order, and before the result (a client drops progress that comes after its result).
 */
function progressRelay(extra: RequestExtra): {
  options: { onprogress?: (progress: Progress) => void };
  sent(): Promise<void>;
} {
  const progressToken = extra._meta?.progressToken;
  let chain = Promise.resolve();
  if (progressToken === undefined) return { options: {}, sent: () => chain };
  // The SDK handles a notification a microtask later than a response that came with it: one
  // turn of the event loop lets the upstream's last progress reach the chain first.
  const settled = () => new Promise<void>((resolve) => setImmediate(resolve)).then(() => chain);
  return {
    options: {
      onprogress: (progress) => {
        chain = chain
          .then(() =>
            extra.sendNotification({ method: 'notifications/progress', params: { ...progress, progressToken } }),
          )
          .catch(() => undefined);
      },
    },
    sent: settled,
  };
}

/**
 * True for the MCP client's own errors that mean no answer came: the bound passed or the
 * connection closed (an upstream that answers with these codes is taken at its word).
 */
function isUnanswered(error: unknown): boolean {
  return (
    error instanceof McpError && (error.code === ErrorCode.RequestTimeout || error.code === ErrorCode.ConnectionClosed)
  );
}

/**
 * A JSON-RPC error as the gateway answers it to the client: the code, message and data it came
 * with. The SDK's server sends an error's `message` as it is, and its client puts
 * `MCP error <code>: ` before the message it receives, so an {@link McpError} (the upstream's, as
 * the gateway's client read it, or the gateway's own) passed on unchanged would reach the client
 * as `MCP error -32601: MCP error -32601: Method not found`.
 */
class RelayedError extends Error {
  readonly code: number;
  readonly data: unknown;

  constructor(code: number, message: string, data: unknown) {
    super(message);
    this.name = 'RelayedError';
    this.code = code;
    this.data = data;
  }
}

/** `error` as the client should read it: an {@link McpError} without the prefix the SDK's client added (see {@link RelayedError}). */
function relayed(error: unknown): unknown {
  if (!(error instanceof McpError)) return error;
  const prefix = `MCP error ${error.code}: `;
  const message = error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
  return new RelayedError(error.code, message, error.data);
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** What {@link GatewaySession}'s approval answers when the person asked declined the call. */
const DECLINED = Symbol('declined');

/** What a model reads when a person declined its call: final, unlike "no person could be asked". */
const DECLINED_MESSAGE = 'a person declined this call; do not ask again for it';

/**
 * A call a person declined: said as a decline, so the model neither retries it (the person would
 * be asked again) nor takes it for a rule's refusal, with the reason the person was asked;
 * `_meta["baton/refusal"].code` is `approval-declined`.
 */
function declined(name: string, asked: Extract<ToolDecision, { allowed: false }>): CallToolResult {
  const message = `${DECLINED_MESSAGE} (${asked.reason.message})`;
  return {
    ...toolError(rejectionMessage(name, { message }, asked.allowedTools)),
    _meta: { 'baton/refusal': { code: 'approval-declined' } },
  };
}

/** A refused call's result: the reason the AI SDK loop gives, for the model to read. */
function refused(name: string, decision: Extract<ToolDecision, { allowed: false }>): CallToolResult {
  return {
    ...toolError(rejectionMessage(name, decision.reason, decision.allowedTools)),
    _meta: { 'baton/refusal': { code: decision.reason.code } },
  };
}
