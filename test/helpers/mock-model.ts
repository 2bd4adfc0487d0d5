/**
 * A mock model for tests of model loops from an app's point of view: the AI SDK's own
 * `MockLanguageModelV4` (`ai/test`), answering each call from a policy of what it was offered.
 */
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4FinishReason,
  LanguageModelV4StreamPart,
  LanguageModelV4ToolChoice,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';
import { MockLanguageModelV4 } from 'ai/test';

/** One model response. */
export interface Reply {
  text?: string;
  calls?: readonly { tool: string; id?: string; input?: unknown }[];
  inputTokens?: number;
  outputTokens?: number;
}

/** What a call of the model was given, as the policy sees it. */
export interface ModelCall {
  index: number;
  /** Names of the tools offered. */
  offered: string[];
  toolChoice: LanguageModelV4ToolChoice | undefined;
  options: LanguageModelV4CallOptions;
}

/** A mock model and what it was asked. */
export interface MockModel {
  model: MockLanguageModelV4;
  calls: ModelCall[];
}

/** A model answering from `policy` (a function of the call, or one reply per call, then "done"). */
export function mockModel(policy: ((call: ModelCall) => Reply) | readonly Reply[]): MockModel {
  const calls: ModelCall[] = [];
  let ids = 0;
  const next = (options: LanguageModelV4CallOptions) => {
    const call: ModelCall = {
      index: calls.length,
      offered: (options.tools ?? []).map((tool) => tool.name),
      toolChoice: options.toolChoice,
      options,
    };
    calls.push(call);
    const reply = typeof policy === 'function' ? policy(call) : (policy[call.index] ?? { text: 'done' });
    const content: LanguageModelV4Content[] = [];
    if (reply.text) content.push({ type: 'text', text: reply.text });
    for (const c of reply.calls ?? []) {
      content.push({
        type: 'tool-call',
        toolCallId: c.id ?? `call-${++ids}`,
        toolName: c.tool,
        input: JSON.stringify(c.input ?? {}),
      });
    }
    const unified = reply.calls?.length ? 'tool-calls' : 'stop';
    const finishReason: LanguageModelV4FinishReason = { unified, raw: unified };
    const input = reply.inputTokens ?? 10;
    const output = reply.outputTokens ?? 5;
    const usage: LanguageModelV4Usage = {
      inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: output, text: output, reasoning: undefined },
    };
    return { content, finishReason, usage };
  };
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => ({ ...next(options), warnings: [] }),
    doStream: async (options) => {
      const { content, finishReason, usage } = next(options);
      const parts: LanguageModelV4StreamPart[] = [{ type: 'stream-start', warnings: [] }];
      for (const item of content) {
        if (item.type === 'text') {
          parts.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: item.text });
          parts.push({ type: 'text-end', id: 't' });
        } else if (item.type === 'tool-call') parts.push(item);
      }
      parts.push({ type: 'finish', finishReason, usage });
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  });
  return { model, calls };
}
