/**
 * The verification agrees with the AI SDK's own signing (checked against approvals the AI SDK
 * really issued), and a secret is bound to its session and agent.
 */
import { generateText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { mockModel } from '../../test/helpers/mock-model.js';
import { type SignedToolApproval, toolApprovalSecret, verifyToolApprovalSignature } from './tool-approval-secret.js';

const KEY = 'tool-approval-secret-test-key-0123456789abcdef';

/** An approval request the AI SDK issues for `input` under `secret`, as a signed approval. */
async function issued(secret: Uint8Array | string, input: unknown): Promise<SignedToolApproval> {
  const { model } = mockModel([{ calls: [{ tool: 'pay', id: 'call-1', input }] }]);
  const result = await generateText({
    model,
    prompt: 'pay',
    tools: {
      pay: tool({ inputSchema: z.record(z.string(), z.unknown()), needsApproval: true, execute: async () => 'paid' }),
    },
    experimental_toolApprovalSecret: secret,
  });
  const request = result.content.find((part) => part.type === 'tool-approval-request');
  if (request?.type !== 'tool-approval-request' || request.signature === undefined)
    throw new Error('no signed request');
  return {
    approvalId: request.approvalId,
    toolCallId: request.toolCall.toolCallId,
    toolName: request.toolCall.toolName,
    input: request.toolCall.input,
    signature: request.signature,
  };
}

describe('verifyToolApprovalSignature', () => {
  // Key order, nesting, unicode and numbers: the digest is over canonical JSON.
  const input = { to: 'Zoë', amount: 12.5, memo: { b: [1, { y: null, x: 'é' }], a: true } };

  it('accepts the approvals the AI SDK signs, after a JSON round trip through a client', async () => {
    const secret = toolApprovalSecret(KEY, { sessionId: 's1', agentId: 'shop' });
    const approval = await issued(secret, input);
    const returned = JSON.parse(JSON.stringify(approval)) as SignedToolApproval;
    expect(verifyToolApprovalSignature(secret, returned)).toBe(true);
    // With the keys of the input in another order: the same canonical JSON.
    expect(
      verifyToolApprovalSignature(secret, { ...returned, input: { memo: input.memo, amount: 12.5, to: 'Zoë' } }),
    ).toBe(true);
    // A string secret, as an app may pass one.
    expect(verifyToolApprovalSignature(KEY, await issued(KEY, input))).toBe(true);
  });

  it('refuses another input, call id, tool, approval id, or a signature that is not one', async () => {
    const secret = toolApprovalSecret(KEY, { sessionId: 's1', agentId: 'shop' });
    const approval = await issued(secret, input);
    const refused: SignedToolApproval[] = [
      { ...approval, input: { ...input, amount: 13 } },
      { ...approval, input: { ...input, extra: 1 } },
      { ...approval, toolCallId: 'call-2' },
      { ...approval, toolName: 'refund' },
      { ...approval, approvalId: 'another' },
      { ...approval, signature: '' },
      { ...approval, signature: 'not base64url!' },
      { ...approval, signature: approval.signature.slice(0, -2) },
    ];
    for (const forged of refused)
      expect(verifyToolApprovalSignature(secret, forged), JSON.stringify(forged)).toBe(false);
  });

  it('binds the secret to its session and agent', async () => {
    const secret = toolApprovalSecret(KEY, { sessionId: 's1', agentId: 'shop' });
    const approval = await issued(secret, input);
    for (const other of [
      toolApprovalSecret(KEY, { sessionId: 's2', agentId: 'shop' }),
      toolApprovalSecret(KEY, { sessionId: 's1', agentId: 'bank' }),
      toolApprovalSecret(KEY, { sessionId: 's1' }),
      toolApprovalSecret(`${KEY}-rotated`, { sessionId: 's1', agentId: 'shop' }),
      KEY,
    ]) {
      expect(verifyToolApprovalSignature(other, approval)).toBe(false);
    }
    // Derived the same way twice: the same secret (another process with the same key agrees).
    expect(verifyToolApprovalSignature(toolApprovalSecret(KEY, { sessionId: 's1', agentId: 'shop' }), approval)).toBe(
      true,
    );
  });

  it('refuses a key shorter than 32 bytes when the secret is made', () => {
    expect(() => toolApprovalSecret('short', { sessionId: 's1' })).toThrow(/5 bytes long; use at least 32/);
  });
});
