/**
 * The keys a server signs its tool approvals with (see `ai-sdk/tool-approval-secret.ts`): each
 * turn gets the secret of its session and agent, so the AI SDK signs the approval requests the
 * turn issues with it, and an approval that comes back is accepted only under the secret of the
 * session and agent it is used in. Like state-token keys, the first key signs and the others
 * still verify (rotation).
 *
 * Where they come from (`createApp({ approvalKeys })`): given, or in stateless mode the state
 * keys, or else one random key made when the app is created, which only this process knows: its
 * approvals do not survive a restart, and another process serving the same store refuses them.
 */
import { randomBytes } from 'node:crypto';
import {
  type SignedToolApproval,
  type ToolApprovalScope,
  toolApprovalKeyBytes,
  toolApprovalSecret,
  verifyToolApprovalSignature,
} from '../ai-sdk/tool-approval-secret.js';
import { InvalidArgumentError } from '../core/errors.js';

/** The keys of a server's tool approvals; see the module comment. */
export interface ApprovalKeys {
  /** The secret of a turn in `scope`, under key number `key` (default 0, the signing key). */
  secret(scope: ToolApprovalScope, key?: number): Uint8Array;
  /**
   * The number of the key under whose secret for `scope` the approval was signed, or undefined
   * when none signed it. `only`: try that key only.
   */
  verify(approval: SignedToolApproval, scope: ToolApprovalScope, only?: number): number | undefined;
}

/** Checks every key now (at least 32 bytes each; `path` names them in the error) and returns the ring. */
export function approvalKeys(keys: readonly (string | Uint8Array)[], path: string): ApprovalKeys {
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new InvalidArgumentError(path, 'expected at least one approval key of 32+ bytes (the first one signs)');
  }
  const ring = keys.map((key, index) => toolApprovalKeyBytes(key, `${path}[${index}]`));
  return {
    secret: (scope, key = 0) => toolApprovalSecret(ring[key]!, scope),
    verify(approval, scope, only) {
      for (let index = 0; index < ring.length; index++) {
        if (only !== undefined && index !== only) continue;
        if (verifyToolApprovalSignature(toolApprovalSecret(ring[index]!, scope), approval)) return index;
      }
      return undefined;
    },
  };
}

/** A random approval key (32 bytes, base64url), for a server given none. */
export function generateApprovalKey(): string {
  return randomBytes(32).toString('base64url');
}
