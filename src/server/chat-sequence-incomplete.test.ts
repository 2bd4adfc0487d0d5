/**
 * The final `data-orchestration` part tells a client when the turn left a sequence unfinished.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { chatTurn, userMessage } from '../../test/helpers/chat-requests.js';
import { parseTemplate } from '../core/validate-template.js';
import { type BatonApp, createApp } from './create-app.js';

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** A three-tool sequence, and room for two model steps only: the turn ends after two tools. */
const hurried = parseTemplate({
  id: 'hurried',
  tools: ['search', 'think', 'reflect'],
  options: { maxSteps: 2 },
  orchestration: {
    steps: [{ name: 'Research', isDefault: true, sequence: ['search', 'think', 'reflect'], requireSequence: true }],
  },
});

describe('sequence-incomplete in the chat stream', () => {
  it('is on the final part when the turn ends before the sequence does, and absent once it is done', async () => {
    const app = createApp({ agents: [hurried], model: 'offline', webRoot: false });
    apps.push(app);
    const first = await chatTurn(app, 'hurried', { messages: [userMessage('How many EVs by 2030?')] });
    expect(first.final).toMatchObject({
      final: true,
      sequenceIncomplete: {
        step: 'Research',
        index: 2,
        length: 3,
        expected: ['reflect'],
        required: true,
        awaitingApproval: false,
      },
    });
    // Only the final part carries it.
    expect(first.snapshots.slice(0, -1).some((s) => s.sequenceIncomplete !== undefined)).toBe(false);
    const second = await chatTurn(app, 'hurried', {
      sessionId: first.sessionId,
      messages: [userMessage('How many EVs by 2030?', 'm1'), userMessage('Go on.')],
    });
    expect(second.final.sequence).toMatchObject({ completed: true });
    expect(second.final.sequenceIncomplete).toBeUndefined();
  });
});
