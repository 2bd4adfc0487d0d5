/**
 * `inputDigest()`: a SHA-256 digest of a tool call's input, written as canonical JSON (object
 * keys sorted, so `{a, b}` and `{b, a}` digest the same), to which an approval a person gives is
 * bound: it counts only for a call with this very input.
 */
import { createHash } from 'node:crypto';

/** The digest of `input` (base64url), see the module comment. */
export function inputDigest(input: unknown): string {
  return createHash('sha256').update(canonicalJson(input)).digest('base64url');
}

/** JSON with object keys sorted at every depth; `undefined` members are left out, as JSON does. */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value)
    .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
    .sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
}
