/**
 * A language model that plays a script: for tests of model loops without a network.
 * Implements the AI SDK provider spec v4 (`generateText`, `streamText`, `ToolLoopAgent`).
 */
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4FinishReason,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';

/** One model response of a script. */
export interface ScriptedTurn {
  text?: string;
  toolCalls?: { toolName: string; input: unknown; toolCallId?: string }[];
  inputTokens?: number;
  outputTokens?: number;
}

/** A list of responses (call i gets entry i; past the end, a plain "done" answer), or a function of the call. */
export type Script =
  | readonly ScriptedTurn[]
  | ((call: { index: number; options: LanguageModelV4CallOptions }) => ScriptedTurn);

/** A {@link LanguageModelV4} that answers from a script and records every call. */
export class ScriptedModel implements LanguageModelV4 {
  readonly specificationVersion = 'v4' as const;
  readonly provider = 'scripted';
  readonly supportedUrls = {};
  /** The options of every call, in order: `calls[i].tools` shows what was offered. */
  readonly calls: LanguageModelV4CallOptions[] = [];
  readonly modelId: string;
  readonly #script: Script;
  #nextId = 0;

  constructor(script: Script, modelId = 'scripted') {
    this.#script = script;
    this.modelId = modelId;
  }

  /** The names of the tools offered in each call so far. */
  offeredTools(): string[][] {
    return this.calls.map((c) => (c.tools ?? []).map((t) => t.name));
  }

  #turn(options: LanguageModelV4CallOptions): ScriptedTurn {
    const index = this.calls.length;
    this.calls.push(options);
    const script = this.#script;
    const turn = typeof script === 'function' ? script({ index, options }) : script[index];
    return turn ?? { text: 'done' };
  }

  #content(turn: ScriptedTurn): LanguageModelV4Content[] {
    const content: LanguageModelV4Content[] = [];
    if (turn.text) content.push({ type: 'text', text: turn.text });
    for (const call of turn.toolCalls ?? []) {
      content.push({
        type: 'tool-call',
        toolCallId: call.toolCallId ?? `call-${++this.#nextId}`,
        toolName: call.toolName,
        input: JSON.stringify(call.input ?? {}),
      });
    }
    return content;
  }

  async doGenerate(options: LanguageModelV4CallOptions) {
    const turn = this.#turn(options);
    return { content: this.#content(turn), finishReason: finishReason(turn), usage: usage(turn), warnings: [] };
  }

  async doStream(options: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
    const turn = this.#turn(options);
    const parts: LanguageModelV4StreamPart[] = [{ type: 'stream-start', warnings: [] }];
    for (const item of this.#content(turn)) {
      if (item.type === 'text') {
        const id = `text-${this.calls.length}`;
        parts.push({ type: 'text-start', id });
        for (const word of item.text.split(/(?<= )/)) parts.push({ type: 'text-delta', id, delta: word });
        parts.push({ type: 'text-end', id });
      } else if (item.type === 'tool-call') {
        parts.push(
          { type: 'tool-input-start', id: item.toolCallId, toolName: item.toolName },
          { type: 'tool-input-delta', id: item.toolCallId, delta: item.input },
          { type: 'tool-input-end', id: item.toolCallId },
          item,
        );
      }
    }
    parts.push({ type: 'finish', finishReason: finishReason(turn), usage: usage(turn) });
    return {
      stream: new ReadableStream<LanguageModelV4StreamPart>({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      }),
    };
  }
}

function finishReason(turn: ScriptedTurn): LanguageModelV4FinishReason {
  const unified = turn.toolCalls?.length ? 'tool-calls' : 'stop';
  return { unified, raw: unified };
}

function usage(turn: ScriptedTurn): LanguageModelV4Usage {
  const input = turn.inputTokens ?? 10;
  const output = turn.outputTokens ?? 5;
  return {
    inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: output, reasoning: undefined },
  };
}
