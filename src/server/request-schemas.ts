/**
 * What a client may send, as zod schemas, and the parsers that turn a bad request into an
 * {@link HttpError} naming the first problem and where it is.
 */
import { z } from 'zod/v4';
import { formatPath } from '../core/template-issues.js';
import { HttpError } from './http-errors.js';

/**
 * Session ids the server accepts: they travel in URLs and headers, so they are kept to a
 * safe alphabet. Server-issued ids are UUIDs.
 */
export const SESSION_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

const sessionIdSchema = z
  .string()
  .regex(SESSION_ID_PATTERN, 'expected 1-128 characters: letters, digits, ".", "_", ":" or "-" (not first)');

/**
 * A data: URL the AI SDK can decode: it reads every one as base64 (`data:,text` is valid
 * RFC 2397 but fails there), and `atob` refuses a length of 4n+1.
 */
const BASE64_DATA_URL = /^data:[^,]*;base64,(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/** Why a part naming a file by anything but inline data is refused. */
const DATA_URL_ONLY =
  'expected a base64 data: URL (data:<media type>;base64,<data>); the server does not download files named by URL';

/**
 * The checks of one part's files that the AI SDK's validator does not make, added to `context`
 * at `path` (relative to the part being refused). The SDK parses a file's URL only while
 * converting the messages (an unparsable one threw a TypeError there, a 500) or decodes and
 * fetches it only after the stream started (a 200 that fails).
 *
 * - `file` and `reasoning-file` parts: only inline data. The AI SDK downloads http(s) file URLs,
 *   and a server that fetched any URL a client names could be made to read its own private
 *   network; a reasoning file's URL goes through `new URL()` like a file's.
 * - no `providerReference` on a file: the AI SDK then sends the provider that reference instead
 *   of the data, so a client could have the model read any file stored in the server's provider
 *   account (another user's upload) by naming its id.
 * - a `steering-message` part (a user message the AI SDK puts inside an assistant message) is a
 *   user message to the model: its files are checked like the others, and converted with
 *   `new URL()` and downloaded like a user's files.
 */
function checkPartFiles(part: Record<string, unknown>, context: z.RefinementCtx, path: readonly (string | number)[]) {
  if (part.type === 'file' || part.type === 'reasoning-file') {
    if (typeof part.url === 'string' && !BASE64_DATA_URL.test(part.url)) {
      context.addIssue({ code: 'custom', path: [...path, 'url'], message: DATA_URL_ONLY });
    }
    if (part.providerReference !== undefined) {
      context.addIssue({
        code: 'custom',
        path: [...path, 'providerReference'],
        message:
          'a file is sent as inline data only; the server does not pass on a provider file reference a client names',
      });
    }
  } else if (part.type === 'steering-message' && Array.isArray(part.parts)) {
    for (const [index, nested] of part.parts.entries()) {
      if (typeof nested === 'object' && nested !== null) {
        checkPartFiles(nested as Record<string, unknown>, context, [...path, 'parts', index]);
      }
    }
  }
}

/**
 * One part of a UI message; its content is checked by the AI SDK's own validator, except the
 * files it holds ({@link checkPartFiles}).
 */
const partSchema = z
  .looseObject({ type: z.string().min(1) })
  .superRefine((part, context) => checkPartFiles(part, context, []));

/** A UI message as `useChat` sends it. */
const uiMessageSchema = z.looseObject({
  id: z.string().optional(),
  // No `system`: the model loop refuses system messages (instructions come from the template),
  // and it would do so only after the stream had started, as a 200 with a failed stream.
  role: z.enum(['user', 'assistant'], {
    error:
      'expected "user" or "assistant"; system messages are not accepted (the agent\'s template gives its instructions)',
  }),
  parts: z.array(partSchema),
});

/**
 * The body of `POST /api/chat/:agentId` (limits applied by {@link parseChatBody}): what
 * `useChat` posts (`id`, `messages`, `trigger`, `messageId`), or `sessionId` instead of `id`.
 */
export const chatBodySchema = z.looseObject({
  /** `useChat`'s chat id: the session, so a chat continues one session across messages and reloads. */
  id: sessionIdSchema.optional(),
  sessionId: sessionIdSchema.optional(),
  messages: z.array(uiMessageSchema).min(1, 'expected at least one message'),
});

/** The body field a chat request named its session in. */
export type SessionField = 'body.id' | 'body.sessionId';

/** A parsed chat request. */
export interface ChatBody {
  /** The session to continue (`sessionId`, else `id`); none starts a new one. */
  sessionId: string | undefined;
  /** The field that named it, for errors about the session (it belongs to another agent, ...). */
  sessionField: SessionField;
  messages: z.infer<typeof uiMessageSchema>[];
}

/**
 * Deepest nesting of arrays and objects a request body may have. The model loop (the AI SDK's
 * message conversion, providers' request encoding) serializes tool inputs and outputs with
 * recursive `JSON.stringify`, which overflows the stack at a few thousand levels: a 500, or a
 * 200 whose stream fails. Real messages nest a dozen levels or so.
 */
export const MAX_JSON_DEPTH = 100;

/** Parses request text as JSON, or throws a 400 that says where the syntax broke. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') {
    throw new HttpError('invalid-json', 'The request body is empty; expected a JSON object.', { path: 'body' });
  }
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new HttpError(
      'body-too-deep',
      `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.`,
      { path: 'body' },
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new HttpError('invalid-json', `The request body is not valid JSON: ${detail}`, { path: 'body' });
  }
}

/**
 * Validates a chat body, including the message count limit and, when given, the most characters
 * of text one message may have (its text parts together).
 */
export function parseChatBody(
  json: unknown,
  maxMessages: number,
  maxMessageChars = Number.POSITIVE_INFINITY,
): ChatBody {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new HttpError('invalid-body', 'Expected a JSON object `{ id?, messages }` (or `{ sessionId?, messages }`).', {
      path: 'body',
    });
  }
  const messages = (json as { messages?: unknown }).messages;
  // Counted before validation, so a huge array is refused without walking it.
  if (Array.isArray(messages) && messages.length > maxMessages) {
    throw new HttpError(
      'too-many-messages',
      `The request has ${messages.length} messages; this server accepts at most ${maxMessages}.`,
      { path: 'body.messages' },
    );
  }
  const result = chatBodySchema.safeParse(json);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const path = issue.path.length ? `body.${formatPath(issue.path)}` : 'body';
    throw new HttpError('invalid-body', `${path}: ${issue.message}`, { path });
  }
  checkMessageText(result.data.messages, maxMessageChars);
  if (!result.data.messages.some((message) => message.role === 'user')) {
    throw new HttpError('no-user-message', 'The conversation has no user message to answer.', {
      path: 'body.messages',
    });
  }
  const { id, sessionId } = result.data;
  // Both may come: useChat always sends its chat id, and an app may add a sessionId of its own
  // (the workaround before the chat id was the session). Two different sessions are a mistake
  // to report, not to settle by picking one.
  if (id !== undefined && sessionId !== undefined && id !== sessionId) {
    throw new HttpError(
      'session-mismatch',
      `body.id ("${id}") and body.sessionId ("${sessionId}") name different sessions; send one of them (useChat sends its chat id as id, which is the session).`,
      { path: 'body.id' },
    );
  }
  return {
    sessionId: sessionId ?? id,
    sessionField: sessionId !== undefined ? 'body.sessionId' : 'body.id',
    messages: result.data.messages,
  };
}

/**
 * Refuses a message with more than `maxChars` characters of text, naming the part where it went
 * over. Everything in a turn reads the latest message (condition regexes, the model, its token
 * count) at least once per model step, so one huge message costs CPU that all turns share.
 */
function checkMessageText(messages: readonly z.infer<typeof uiMessageSchema>[], maxChars: number): void {
  for (const [i, message] of messages.entries()) {
    let chars = 0;
    const count = (part: Record<string, unknown>, path: string) => {
      if (part.type === 'steering-message' && Array.isArray(part.parts)) {
        // A steering message's text parts reach the model as a user message's: they count too.
        for (const [k, nested] of part.parts.entries()) {
          if (typeof nested === 'object' && nested !== null) {
            count(nested as Record<string, unknown>, `${path}.parts[${k}]`);
          }
        }
        return;
      }
      if (part.type !== 'text' || typeof part.text !== 'string') return;
      chars += part.text.length;
      if (chars > maxChars) {
        throw new HttpError(
          'message-too-large',
          `Message ${i} has more than ${maxChars} characters of text; this server accepts at most ${maxChars} per message.`,
          { path: `${path}.text` },
        );
      }
    };
    for (const [j, part] of message.parts.entries()) count(part, `body.messages[${i}].parts[${j}]`);
  }
}

/** Validates a session id from the URL or a header. */
export function parseSessionId(value: string, path: string): string {
  if (!SESSION_ID_PATTERN.test(value)) {
    throw new HttpError(
      'invalid-session-id',
      'A session id is 1-128 characters: letters, digits, ".", "_", ":" or "-" (not first).',
      { path },
    );
  }
  return value;
}

/**
 * True when brackets outside strings nest deeper than `limit`. A scan of the text, so that
 * neither it nor `JSON.parse` recurses on a hostile body; invalid JSON is left to the parser.
 */
function nestedDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === 0x5c)
        i++; // a backslash escapes the next character, a quote included
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) {
      inString = true;
    } else if (code === 0x5b || code === 0x7b) {
      if (++depth > limit) return true;
    } else if (code === 0x5d || code === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** Most events one `GET /api/sessions/:id/events` returns. */
export const MAX_EVENTS_PER_PAGE = 500;

const count = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,15}$/, 'expected a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const eventsQuerySchema = z.object({
  after: count(0, Number.MAX_SAFE_INTEGER).optional(),
  limit: count(1, MAX_EVENTS_PER_PAGE).optional(),
});

/** The query of `GET /api/sessions/:id/events`: `after` (default 0) and `limit` (default 100). */
export function parseEventsQuery(query: Record<string, string>): { after: number; limit: number } {
  const result = eventsQuerySchema.safeParse(query);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const path = `query.${formatPath(issue.path)}`;
    throw new HttpError('invalid-argument', `${path}: ${issue.message}`, { path });
  }
  return { after: result.data.after ?? 0, limit: result.data.limit ?? 100 };
}
