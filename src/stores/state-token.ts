/**
 * Signed state tokens for stateless deployments (SPEC section 6, last paragraph): the
 * orchestration state travels with the client, signed with HMAC-SHA256 over the state and an
 * expiry, and a token that was altered, signed with another key or expired is never used.
 *
 * Format (every part URL-, cookie- and header-safe, no padding):
 *
 *   v2.<kid>.<payload>.<signature>
 *
 * - `v2`: the format version. Encoding always writes `v2`; decoding also accepts `v1` (below),
 *   so tokens issued before an upgrade keep working until they expire. Anything else is
 *   rejected as malformed.
 * - `kid`: base64url of the first 8 bytes of SHA-256(key), 11 characters. It only says WHICH
 *   listed key to check; it reveals nothing an attacker could not already brute-force from the
 *   HMAC itself, so it costs no secrecy.
 * - `payload`: base64url of the raw DEFLATE (RFC 1951, no zlib or gzip wrapper) of the UTF-8
 *   JSON `{"s": <state>, "exp": <ms since epoch>}`. The token comes back in a request header,
 *   which Node caps at 16 KiB, and a long session's state is mostly random tool call ids: deflate
 *   takes such a state to 55 to 70% of its length (see `docs/http-api.md`, Stateless mode), which
 *   is what lets a long session with hosted providers' ids keep fitting. Compressing leaks
 *   nothing: the token is signed, not encrypted, and its holder could read the state anyway.
 * - `signature`: base64url of HMAC-SHA256(key, "v2.<kid>.<payload>"), 43 characters, over the
 *   compressed payload; the version and the key id are covered too, so neither can be swapped
 *   without detection (a `v1` payload relabelled `v2`, or back, is a bad signature).
 *
 * `v1` (Baton before compression) is the same but for its payload, the base64url of the JSON
 * itself, uncompressed; it is decoded, never issued.
 *
 * How a rejection is classified (checks run in this order, the first failure wins):
 * 1. longer than `maxLength`, empty, unknown version, a bad character, non-canonical base64url,
 *    more than four parts or a part of the wrong size → `malformed`;
 *    fewer than four parts, or a signature shorter than 43 characters, where everything present
 *    is a valid beginning of a token → `truncated`;
 * 2. a `kid` that matches none of the listed keys → `unknown-key` (rotated out, or another
 *    deployment's key); a `kid` that matches but whose HMAC does not verify → `bad-signature`
 *    (the token was altered). Only then is the payload inflated or parsed at all, so nobody
 *    without a key can make the server inflate anything;
 * 3. a validly signed `v2` payload that is not exactly one raw deflate stream, or inflates to
 *    more than {@link MAX_STATE_PAYLOAD_BYTES} (the inflate stops there, so even a key holder's
 *    bug cannot make a decompression bomb) → `invalid-state`;
 * 4. `exp` reached → `expired` (checked after the signature, so a forger learns nothing);
 * 5. a validly signed payload that is not `{s, exp}` with a well-formed state → `invalid-state`.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { BatonError, type BatonErrorOptions, InvalidArgumentError } from '../core/errors.js';
import { DEFAULT_SESSION_TTL_MS, type OrchestrationState } from '../core/state.js';
import { assertState, describeType } from '../core/state-check.js';

/** Why a state token was rejected; `StateTokenError.reason` is one of these. */
export const StateTokenErrorReason = {
  malformed: 'malformed',
  truncated: 'truncated',
  badSignature: 'bad-signature',
  unknownKey: 'unknown-key',
  expired: 'expired',
  invalidState: 'invalid-state',
} as const;

/** One of the {@link StateTokenErrorReason} values. */
export type StateTokenErrorReason = (typeof StateTokenErrorReason)[keyof typeof StateTokenErrorReason];

const REASON_ADVICE: Record<StateTokenErrorReason, string> = {
  malformed:
    'it is not a Baton state token (or it was corrupted in transit); send the token exactly as it was issued, or start a new session',
  truncated:
    'it was cut short, probably by a URL, header or cookie length limit; send the whole token, or start a new session',
  'bad-signature':
    'its signature does not match its contents, so it was altered after it was issued; it was not used; start a new session',
  'unknown-key':
    'it was signed with a key this server does not hold; after rotating keys keep the old key in the key list (after the new one) until its tokens expire',
  expired: 'request a fresh token by starting a new session',
  'invalid-state':
    'it is validly signed but does not hold a usable orchestration state (issued by an incompatible version?); start a new session',
};

/** A state token was rejected: it was malformed, truncated, altered, signed with an unknown key, expired or held no usable state. */
export class StateTokenError extends BatonError {
  /** Why the token was rejected. */
  readonly reason: StateTokenErrorReason;

  constructor(reason: StateTokenErrorReason, detail: string, options: BatonErrorOptions = {}) {
    super('state-token', `State token rejected (${reason}): ${detail}; ${REASON_ADVICE[reason]}.`, options);
    this.name = 'StateTokenError';
    this.reason = reason;
  }

  /** True for a {@link StateTokenError} from any copy of the package. */
  static override isInstance(error: unknown): error is StateTokenError {
    return BatonError.isInstance(error) && error.code === 'state-token';
  }
}

/** A signing key: a string (its UTF-8 bytes are used) or raw bytes; at least 32 bytes either way. */
export type StateTokenKey = string | Uint8Array;

/** Options of {@link encodeStateToken}. */
export interface EncodeStateTokenOptions {
  /** Signing keys; the FIRST one signs. The others are only for decoding during a rotation. */
  keys: readonly StateTokenKey[];
  /** Lifetime of the token in milliseconds (default 24 hours). */
  ttl?: number;
  /** Clock, in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
}

/** Options of {@link decodeStateToken}. */
export interface DecodeStateTokenOptions {
  /** Accepted keys, newest first; a token signed with any of them is accepted. */
  keys: readonly StateTokenKey[];
  /** Clock, in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
  /** Longest token accepted, in characters (default 1 MiB); longer ones are rejected before any work. */
  maxLength?: number;
}

/** Shortest key accepted, in bytes: HMAC-SHA256 keys below the hash size weaken it. */
export const MIN_STATE_KEY_BYTES = 32;

/** Longest token {@link decodeStateToken} accepts unless told otherwise: 1 MiB. */
export const DEFAULT_STATE_TOKEN_MAX_LENGTH = 1024 * 1024;

/**
 * Most bytes of JSON a token's payload may carry (1 MiB): encoding refuses a larger state, and
 * decoding stops inflating a `v2` payload there. A `v1` token of the default longest length
 * ({@link DEFAULT_STATE_TOKEN_MAX_LENGTH}) carries at most 768 KiB of JSON, so no state a `v1`
 * token could carry is refused; a real session's state is far smaller (its long lists are bounded).
 */
export const MAX_STATE_PAYLOAD_BYTES = 1024 * 1024;

/** The version every new token is written in. */
const VERSION = 'v2';
/** The versions decoded: `v1` (uncompressed) only until the tokens issued before `v2` expire. */
const VERSIONS: readonly string[] = ['v1', VERSION];
/**
 * The deflate level. Measured on a long session's state (256 random 29-character call ids, 16
 * approvals, 8 running calls: 13 KB of JSON) on Node 24: levels 5 to 9 all give 7.05 KB (about
 * 9,410 base64url characters), level 1 7.24 KB; level 6 takes 0.1 ms per encode, level 9 0.14 ms.
 * Level 6 is as small as any, and it runs once per turn; inflating takes 0.03 ms.
 */
const DEFLATE_LEVEL = 6;
const KID_LENGTH = 11; // base64url of 8 bytes
const SIGNATURE_LENGTH = 43; // base64url of 32 bytes
const BASE64URL = /^[A-Za-z0-9_-]*$/;

interface PreparedKey {
  bytes: Uint8Array;
  kid: string;
}

/** Signs `state` into a token that expires `ttl` milliseconds from now; the first key signs. */
export function encodeStateToken(state: OrchestrationState, options: EncodeStateTokenOptions): string {
  const keys = prepareKeys(options?.keys);
  const signer = keys[0]!;
  const ttl = options.ttl ?? DEFAULT_SESSION_TTL_MS;
  if (!Number.isSafeInteger(ttl) || ttl < 1) {
    throw new InvalidArgumentError('ttl', `expected a positive whole number of milliseconds, got ${String(ttl)}`);
  }
  const now = (options.now ?? Date.now)();
  const exp = now + ttl;
  // A NaN or fractional clock would produce an expiry no decoder can check.
  if (!Number.isSafeInteger(exp) || exp < 0) {
    throw new InvalidArgumentError('now', `the clock returned ${String(now)}; expected milliseconds since the epoch`);
  }
  // Validating here means a token can never carry a state that decoding would refuse.
  assertState(state);
  const json = Buffer.from(JSON.stringify({ s: state, exp }), 'utf8');
  if (json.byteLength > MAX_STATE_PAYLOAD_BYTES) {
    throw new InvalidArgumentError(
      'state',
      `the state takes ${json.byteLength} bytes of JSON; a state token carries at most ${MAX_STATE_PAYLOAD_BYTES}`,
    );
  }
  const payload = deflateRawSync(json, { level: DEFLATE_LEVEL }).toString('base64url');
  const signingInput = `${VERSION}.${signer.kid}.${payload}`;
  return `${signingInput}.${sign(signer.bytes, signingInput).toString('base64url')}`;
}

/**
 * Verifies `token` and returns the state it carries; throws a {@link StateTokenError} unless it
 * was signed by one of `keys`, is unaltered and unexpired, and holds a well-formed state.
 */
export function decodeStateToken(token: string, options: DecodeStateTokenOptions): OrchestrationState {
  const keys = prepareKeys(options?.keys);
  const maxLength = options.maxLength ?? DEFAULT_STATE_TOKEN_MAX_LENGTH;
  if (!Number.isSafeInteger(maxLength) || maxLength < 1) {
    throw new InvalidArgumentError('maxLength', `expected a positive whole number, got ${String(maxLength)}`);
  }
  if (typeof token !== 'string')
    throw new StateTokenError('malformed', `expected a string, got ${describeType(token)}`);
  if (token.length > maxLength) {
    throw new StateTokenError('malformed', `the token is ${token.length} characters long; the limit is ${maxLength}`);
  }
  if (token.length === 0) throw new StateTokenError('malformed', 'the token is empty');

  const parts = token.split('.');
  if (parts.length > 4) throw new StateTokenError('malformed', `the token has ${parts.length} parts; expected 4`);
  if (parts.length < 4) {
    throw isTokenPrefix(parts)
      ? new StateTokenError('truncated', `the token has ${parts.length} of its 4 parts`)
      : new StateTokenError('malformed', `the token has ${parts.length} parts; expected 4`);
  }
  const [version, kid, payloadText, signatureText] = parts as [string, string, string, string];
  if (!VERSIONS.includes(version)) {
    throw new StateTokenError(
      'malformed',
      `unsupported token version "${printable(version)}"; expected ${VERSIONS.map((v) => `"${v}"`).join(' or ')}`,
    );
  }
  if (kid.length !== KID_LENGTH || decodeBase64url(kid) === undefined) {
    throw new StateTokenError('malformed', 'the key id is not 11 base64url characters');
  }
  if (payloadText.length === 0 || decodeBase64url(payloadText) === undefined) {
    throw new StateTokenError('malformed', 'the payload is not canonical unpadded base64url');
  }
  if (signatureText.length < SIGNATURE_LENGTH && BASE64URL.test(signatureText)) {
    throw new StateTokenError(
      'truncated',
      `the signature is ${signatureText.length} of its ${SIGNATURE_LENGTH} characters long`,
    );
  }
  const signature = signatureText.length === SIGNATURE_LENGTH ? decodeBase64url(signatureText) : undefined;
  if (signature === undefined) {
    throw new StateTokenError('malformed', 'the signature is not 43 canonical base64url characters');
  }

  // Two listed keys share a kid only if they are equal (or in a 2^-64 accident), so trying
  // every match keeps the result right either way.
  const candidates = keys.filter((key) => key.kid === kid);
  if (candidates.length === 0) {
    throw new StateTokenError('unknown-key', `no listed key has the key id "${kid}"`);
  }
  const signingInput = `${version}.${kid}.${payloadText}`;
  if (!candidates.some((key) => timingSafeEqual(sign(key.bytes, signingInput), signature))) {
    throw new StateTokenError('bad-signature', `the signature does not verify with the key "${kid}"`);
  }

  // From here on the payload was produced by a key holder; a failure means an incompatible
  // issuer, not an attacker, but it is still refused rather than used.
  const bytes = decodeBase64url(payloadText)!;
  const envelope = parsePayload(version === VERSION ? inflatePayload(bytes) : bytes);
  const at = (options.now ?? Date.now)();
  // A broken clock (NaN) would make every comparison false and accept any token: fail closed.
  if (typeof at !== 'number' || !Number.isFinite(at)) {
    throw new InvalidArgumentError('now', `the clock returned ${String(at)}; expected milliseconds since the epoch`);
  }
  if (at >= envelope.exp) {
    throw new StateTokenError('expired', `the token expired at ${formatTime(envelope.exp)}`);
  }
  try {
    return assertState(envelope.s, 'token.s');
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new StateTokenError('invalid-state', detail, { cause: error });
  }
}

/**
 * Parses a `BATON_STATE_KEYS` value: comma-separated keys, the first one signs, the rest are
 * still accepted (rotation). Surrounding whitespace is trimmed; keys cannot contain commas.
 */
export function parseStateKeys(value: string): string[] {
  return parseSigningKeys(value, 'BATON_STATE_KEYS');
}

/**
 * Parses comma-separated signing keys of at least 32 bytes from the environment variable
 * `path` (the first signs, the rest are still accepted); errors name `path`.
 */
export function parseSigningKeys(value: string, path: string): string[] {
  if (typeof value !== 'string') throw new InvalidArgumentError(path, `expected a string, got ${describeType(value)}`);
  if (value.trim().length === 0) {
    throw new InvalidArgumentError(path, 'no keys given; set it to one or more comma-separated keys of 32+ bytes');
  }
  const entries = value.split(',').map((entry) => entry.trim());
  entries.forEach((entry, index) => {
    if (entry.length === 0) {
      throw new InvalidArgumentError(
        path,
        `key ${index + 1} of ${entries.length} is empty; remove the stray comma (keys are comma-separated, the first signs)`,
      );
    }
    checkKeyLength(Buffer.byteLength(entry, 'utf8'), `${path}[${index}]`);
  });
  return entries;
}

function prepareKeys(keys: readonly StateTokenKey[] | undefined): PreparedKey[] {
  if (!Array.isArray(keys))
    throw new InvalidArgumentError('keys', `expected an array of keys, got ${describeType(keys)}`);
  if (keys.length === 0) {
    throw new InvalidArgumentError('keys', 'no keys given; pass at least one key of 32+ bytes (the first one signs)');
  }
  return keys.map((key: unknown, index) => {
    let bytes: Uint8Array;
    if (typeof key === 'string') bytes = Buffer.from(key, 'utf8');
    else if (key instanceof Uint8Array) bytes = key;
    else
      throw new InvalidArgumentError(`keys[${index}]`, `expected a string or a Uint8Array, got ${describeType(key)}`);
    checkKeyLength(bytes.byteLength, `keys[${index}]`);
    return { bytes, kid: createHash('sha256').update(bytes).digest().subarray(0, 8).toString('base64url') };
  });
}

function checkKeyLength(byteLength: number, path: string): void {
  // The message never echoes the key: it is a secret.
  if (byteLength < MIN_STATE_KEY_BYTES) {
    throw new InvalidArgumentError(
      path,
      `the key is ${byteLength} bytes long; use at least ${MIN_STATE_KEY_BYTES} random bytes (e.g. \`openssl rand -base64 32\`)`,
    );
  }
}

function sign(key: Uint8Array, signingInput: string): Buffer {
  return createHmac('sha256', key).update(signingInput, 'utf8').digest();
}

/**
 * Strict base64url: only the URL alphabet, no padding, and canonical (the unused low bits of
 * the last character are zero). `Buffer.from(text, 'base64url')` skips bad characters and
 * ignores those bits, so two different strings could otherwise decode to the same bytes.
 */
function decodeBase64url(text: string): Buffer | undefined {
  if (!BASE64URL.test(text) || text.length % 4 === 1) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

/** True when the parts present (fewer than 4) could be the start of a well-formed token. */
function isTokenPrefix(parts: readonly string[]): boolean {
  const last = parts.length - 1;
  return parts.every((part, index) => {
    if (index === 0) {
      return index === last
        ? part.length > 0 && VERSIONS.some((version) => version.startsWith(part))
        : VERSIONS.includes(part);
    }
    if (index === 1) {
      return BASE64URL.test(part) && (index === last ? part.length <= KID_LENGTH : part.length === KID_LENGTH);
    }
    return BASE64URL.test(part);
  });
}

interface Envelope {
  s: unknown;
  exp: number;
}

/**
 * Inflates a `v2` payload whose signature verified. The output is capped, so that a payload
 * that inflates to far more than any state (a key holder's bug) fails fast instead of taking
 * the process's memory.
 */
function inflatePayload(bytes: Buffer): Buffer {
  let result: InflateResult;
  try {
    // `info: true` (not in Node's types) also returns the engine, which says how much input the
    // stream used.
    result = inflateRawSync(bytes, {
      maxOutputLength: MAX_STATE_PAYLOAD_BYTES,
      info: true,
    }) as unknown as InflateResult;
  } catch (error) {
    // maxOutputLength reached: Node throws a RangeError with this code rather than truncate.
    const tooLarge = (error as { code?: unknown } | null)?.code === 'ERR_BUFFER_TOO_LARGE';
    throw new StateTokenError(
      'invalid-state',
      tooLarge
        ? `the signed payload inflates to more than ${MAX_STATE_PAYLOAD_BYTES} bytes`
        : 'the signed payload is not raw deflate data',
      { cause: error },
    );
  }
  // zlib stops at the end of the stream and ignores what follows; an encoder never writes more,
  // so bytes after it mean another issuer, refused like any payload that is not what we write.
  if (result.engine.bytesWritten !== bytes.byteLength) {
    throw new StateTokenError('invalid-state', 'the signed payload has bytes after its deflate stream');
  }
  return result.buffer;
}

/** What `inflateRawSync` returns with `info: true`. */
interface InflateResult {
  buffer: Buffer;
  engine: { bytesWritten: number };
}

function parsePayload(bytes: Buffer): Envelope {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (error) {
    throw new StateTokenError('invalid-state', 'the signed payload is not UTF-8 JSON', { cause: error });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new StateTokenError('invalid-state', `the signed payload is ${describeType(value)}, not {s, exp}`);
  }
  const envelope = value as Record<string, unknown>;
  const extra = Object.keys(envelope).filter((key) => key !== 's' && key !== 'exp');
  if (extra.length > 0) {
    throw new StateTokenError('invalid-state', `the signed payload has unexpected fields: ${extra.join(', ')}`);
  }
  if (!('s' in envelope)) throw new StateTokenError('invalid-state', 'the signed payload has no state');
  const exp = envelope.exp;
  if (typeof exp !== 'number' || !Number.isSafeInteger(exp) || exp < 0) {
    throw new StateTokenError('invalid-state', 'the signed payload has no valid expiry');
  }
  return { s: envelope.s, exp };
}

function formatTime(ms: number): string {
  // Date cannot represent every safe integer; fall back to the raw number.
  return ms <= 8.64e15 ? new Date(ms).toISOString() : `${ms} ms since the epoch`;
}

/** A short, safe rendering of attacker-controlled text for an error message. */
function printable(text: string): string {
  const shown = text.slice(0, 16).replace(/[^\x20-\x7e]/g, '?');
  return text.length > 16 ? `${shown}...` : shown;
}
