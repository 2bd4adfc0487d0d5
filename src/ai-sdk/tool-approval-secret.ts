/**
 * Tool approvals a client cannot forge. The AI SDK signs every approval request it issues when
 * a call is given `experimental_toolApprovalSecret`, and checks the signature of an approval
 * that comes back in the history before it runs the call. Its signature binds the approval id,
 * the call id, the tool and a digest of the input, but not the conversation: with one secret
 * for every session, a person's approval in one session could be replayed in another. So each
 * session (and agent) signs with its own secret, derived from one key:
 *
 * ```ts
 * const secret = toolApprovalSecret(process.env.APPROVAL_KEY, { sessionId, agentId });
 * streamText({ model, messages, experimental_toolApprovalSecret: secret, ...orchestration });
 * ```
 *
 * {@link verifyToolApprovalSignature} checks the AI SDK's own signature (format
 * `ai-sdk-tool-approval-v1`) without running a call, so a server can refuse a forged approval
 * before its turn starts; the AI SDK does not export its verification.
 */
import { createHash, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { InvalidArgumentError } from '../core/errors.js';

/** Shortest approval key accepted, in bytes: an HMAC-SHA256 key below the hash size weakens it. */
export const MIN_TOOL_APPROVAL_KEY_BYTES = 32;

/**
 * What an approval secret is scoped to: the session, the agent when there are several, and
 * optionally the user message the turn answers.
 */
export interface ToolApprovalScope {
  sessionId: string;
  agentId?: string;
  /**
   * The identity of the user message the turn answers (the server uses the key the session
   * records for it, `lastMessageKey`). Given, an approval verifies only in a request that answers
   * the same message, so an approval asked for in one turn cannot be carried past a later user
   * message into another turn of the session. Absent, every turn of the session shares the secret.
   */
  turn?: string;
}

/** Separates these secrets from anything else derived from the same key (state tokens). */
const SALT = 'baton-agents tool approval v1';

/**
 * The `experimental_toolApprovalSecret` of a turn: HKDF-SHA256 of `key` for this session and
 * agent (and, given `scope.turn`, the user message it answers). Approvals issued under it verify
 * only in the same session of the same agent (answering the same message).
 */
export function toolApprovalSecret(key: string | Uint8Array, scope: ToolApprovalScope): Uint8Array {
  const bytes = toolApprovalKeyBytes(key, 'key');
  // Without a turn, the info is what it always was, so secrets of session scopes do not change.
  // A turn is a digest: it holds a client's message id, and HKDF takes at most 1024 bytes of info.
  const info = JSON.stringify(
    scope.turn === undefined
      ? [scope.agentId ?? null, scope.sessionId]
      : [scope.agentId ?? null, scope.sessionId, createHash('sha256').update(scope.turn, 'utf8').digest('base64url')],
  );
  return new Uint8Array(hkdfSync('sha256', bytes, SALT, info, 32));
}

/**
 * The bytes of an approval key (a string's UTF-8 bytes); throws an `invalid-argument` error at
 * `path` when the key is shorter than {@link MIN_TOOL_APPROVAL_KEY_BYTES}.
 */
export function toolApprovalKeyBytes(key: string | Uint8Array, path: string): Uint8Array {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  if (!(bytes instanceof Uint8Array)) {
    throw new InvalidArgumentError(path, 'expected an approval key: a string or a Uint8Array');
  }
  if (bytes.byteLength < MIN_TOOL_APPROVAL_KEY_BYTES) {
    // The message never echoes the key: it is a secret.
    throw new InvalidArgumentError(
      path,
      `the approval key is ${bytes.byteLength} bytes long; use at least ${MIN_TOOL_APPROVAL_KEY_BYTES} random bytes (e.g. \`openssl rand -base64 32\`)`,
    );
  }
  return bytes;
}

/** An approval as it comes back in a history: what the AI SDK signed, and its signature. */
export interface SignedToolApproval {
  approvalId: string;
  toolCallId: string;
  toolName: string;
  input: unknown;
  signature: string;
}

/**
 * True when `signature` is the AI SDK's signature of this approval under `secret`: the same
 * HMAC-SHA256 over `["ai-sdk-tool-approval-v1", approvalId, toolCallId, toolName, digest]`,
 * where `digest` is the base64url SHA-256 of the input as canonical JSON (keys sorted).
 */
export function verifyToolApprovalSignature(secret: string | Uint8Array, approval: SignedToolApproval): boolean {
  const { approvalId, toolCallId, toolName, input, signature } = approval;
  const given = Buffer.from(signature, 'base64url');
  const payload = JSON.stringify(['ai-sdk-tool-approval-v1', approvalId, toolCallId, toolName, inputDigest(input)]);
  const expected = createHmac('sha256', secret).update(payload, 'utf8').digest();
  return given.byteLength === expected.byteLength && timingSafeEqual(given, expected);
}

/** The AI SDK's digest of a tool input: SHA-256 of its canonical JSON, base64url. */
function inputDigest(input: unknown): string {
  // The AI SDK encodes a missing input as the empty string (TextEncoder of undefined).
  return createHash('sha256')
    .update(canonicalJson(input) ?? '', 'utf8')
    .digest('base64url');
}

/** JSON with object keys sorted, as the AI SDK writes it for digests. */
function canonicalJson(value: unknown): string | undefined {
  if (value === null || value === undefined || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    return `[${value.map((element) => (element === undefined ? 'null' : canonicalJson(element))).join(',')}]`;
  }
  const record = value as Record<string, unknown>;
  return `{${Object.keys(record)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`)
    .join(',')}}`;
}
