/**
 * Tool approvals over the HTTP API as a client handles them: the tools of
 * `test/fixtures/approval-tools.ts`, the agents of `test/fixtures/approval-agents/` that use
 * them, and a client that keeps its conversation as
 * `useChat` does (each answer read from the UI message stream with the AI SDK's
 * `readUIMessageStream`, a continuation appended to the last assistant message) and answers an
 * approval as `addToolApprovalResponse` does.
 */
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { expect } from 'vitest';
import type { OrchestrationSnapshot } from '../../src/server/api-types.js';
import { type BatonApp, type CreateAppOptions, createApp } from '../../src/server/create-app.js';
import { approvalTools, type ToolRun } from '../fixtures/approval-tools.js';
import { chunksOf, type RequestTarget, snapshotsOf, userMessage } from './chat-requests.js';

export { approvalTools, type ToolRun };

/** The state-token key of the stateless mode of {@link SESSION_MODES}. */
export const APPROVAL_STATE_KEY = 'approval-tests-state-key-0123456789abcdef';

/** The two ways a server keeps sessions, each approval case runs in both (`describe.each`). */
export const SESSION_MODES = [
  ['stored', {}],
  ['stateless', { stateless: { keys: [APPROVAL_STATE_KEY] } }],
] as const satisfies readonly (readonly [string, Partial<CreateAppOptions>])[];

/**
 * An app serving `options.agents` with the approval tools, whose runs `ran` collects (no web
 * root). The caller closes it.
 */
export function approvalApp(options: CreateAppOptions): { app: BatonApp; ran: ToolRun[] } {
  const ran: ToolRun[] = [];
  const app = createApp({ tools: approvalTools((run) => ran.push(run)), webRoot: false, ...options });
  return { app, ran };
}

/** The folder of the `shop` and `bank` agents: `pay` (needs approval) and `search`. */
export const APPROVAL_AGENTS = new URL('../fixtures/approval-agents/', import.meta.url).pathname;

/** A tool part as a client holds it. */
export type ToolPart = Record<string, unknown> & {
  type: string;
  toolCallId: string;
  state: string;
  input?: unknown;
  approval?: { id: string; approved?: boolean; signature?: string; [field: string]: unknown };
};

/** What one request answered. */
export interface Answer {
  response: Response;
  chunks: UIMessageChunk[];
  final: OrchestrationSnapshot | undefined;
}

/**
 * A chat client of one agent and one session: it keeps the conversation, the session id and
 * (stateless) the latest state token, as the inspector does.
 */
export class ApprovalClient {
  messages: UIMessage[] = [];
  sessionId: string | undefined;
  token: string | undefined;

  constructor(
    readonly target: RequestTarget,
    readonly agentId: string,
  ) {}

  /** Sends a user message (with the id given, else a random one); the answer is appended to the conversation. */
  async say(text: string, id?: string): Promise<Answer> {
    this.messages.push(userMessage(text, id) as UIMessage);
    return this.send();
  }

  /**
   * Answers the approval request of the last message as `addToolApprovalResponse` does, and
   * sends the conversation as `sendAutomaticallyWhen` does.
   */
  async answer(approved: boolean): Promise<Answer> {
    const part = this.pendingApproval();
    part.state = 'approval-responded';
    part.approval = { ...part.approval!, approved };
    return this.send();
  }

  /** The approval request the last message waits on. */
  pendingApproval(): ToolPart {
    const part = toolParts(this.messages.at(-1)).find((p) => p.state === 'approval-requested');
    if (!part) throw new Error(`no approval request in ${JSON.stringify(this.messages.at(-1))}`);
    return part;
  }

  /** POSTs `messages` (default the conversation) as this client would, without keeping the answer. */
  post(messages: readonly unknown[] = this.messages, agentId = this.agentId): Promise<Response> {
    return Promise.resolve(
      this.target.request(`/api/chat/${agentId}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(this.token ? { 'x-orchestration-state': this.token } : {}),
        },
        body: JSON.stringify({ ...(this.sessionId ? { sessionId: this.sessionId } : {}), messages }),
      }),
    );
  }

  private async send(): Promise<Answer> {
    const response = await this.post();
    expect(response.status, await response.clone().text()).toBe(200);
    const chunks = await chunksOf(response);
    expect(chunks.filter((chunk) => chunk.type === 'error')).toEqual([]);
    this.sessionId = response.headers.get('x-session-id') ?? this.sessionId;
    const final = snapshotsOf(chunks).at(-1);
    if (final?.stateToken) this.token = final.stateToken;
    // A continuation (the history ends with the assistant's message) streams into that message.
    const last = this.messages.at(-1);
    const continued = last?.role === 'assistant' ? last : undefined;
    let message: UIMessage | undefined;
    const stream = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    });
    for await (const snapshot of readUIMessageStream({
      stream,
      ...(continued ? { message: structuredClone(continued) } : {}),
    })) {
      message = snapshot;
    }
    if (message) {
      if (continued) this.messages[this.messages.length - 1] = message;
      else this.messages.push(message);
    }
    return { response, chunks, final };
  }
}

/** The tool parts of a message. */
export function toolParts(message: UIMessage | undefined): ToolPart[] {
  return (message?.parts ?? []).filter((part) => part.type.startsWith('tool-')) as unknown as ToolPart[];
}
