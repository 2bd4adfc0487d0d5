/**
 * Reading the latest user message out of seed-style or AI SDK-style message arrays.
 */
import type { MessageInfo } from './conditions.js';

/** A chat message as the seed API and the AI SDK pass them; only `role` and the text matter here. */
export interface ChatMessage {
  role: string;
  /** A string, or AI SDK content parts (`{type: 'text', text}` parts are read). */
  content?: unknown;
  /** AI SDK UI messages carry their text in `parts`. */
  parts?: unknown;
  /** When present, identifies the message (UI messages have one). */
  id?: unknown;
}

const cache = new WeakMap<object, { index: number; info: MessageInfo }>();
/** The latest answer, checked before the cache (it holds on to one message until the next one). */
let last: { message: object | undefined; index: number; info: MessageInfo | undefined } = {
  message: undefined,
  index: -1,
  info: undefined,
};

/**
 * The latest `role: "user"` message of `messages` as text, with a key that identifies it:
 * its `id` when it has one, else its position and a hash of its text. Cached per message
 * object, because a turn asks for it before every model step.
 */
export function latestUserMessage(messages: readonly ChatMessage[] | undefined): MessageInfo | undefined {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (typeof message !== 'object' || message === null || message.role !== 'user') continue;
    // The same message as last time (most calls): no lookup in the cache.
    if (message === last.message && i === last.index) return last.info;
    const cached = cache.get(message);
    if (cached?.index === i) {
      last = { message, ...cached };
      return cached.info;
    }
    const text = messageText(message);
    const id = typeof message.id === 'string' && message.id !== '' ? message.id : `#${hash(text)}`;
    const info: MessageInfo = { text, lower: text.toLowerCase(), key: `${i}:${id}` };
    cache.set(message, { index: i, info });
    last = { message, index: i, info };
    return info;
  }
  return undefined;
}

/** The text of one message: a string content, or its text parts joined with newlines. */
export function messageText(message: ChatMessage): string {
  if (typeof message.content === 'string') return message.content;
  const parts = Array.isArray(message.content) ? message.content : Array.isArray(message.parts) ? message.parts : [];
  const texts: string[] = [];
  for (const part of parts) {
    if (typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text') {
      const t = (part as { text?: unknown }).text;
      if (typeof t === 'string') texts.push(t);
    }
  }
  return texts.join('\n');
}

/** FNV-1a, 32 bit: a cheap fingerprint so a resent identical text at the same position is not "new". */
function hash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36);
}
