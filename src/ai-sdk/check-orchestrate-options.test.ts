import { tool } from 'ai';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import { MAX_SESSION_ID_LENGTH } from '../core/state-check.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { orchestrateOptionSchemas, quickOptionChecks } from './check-orchestrate-options.js';
import { orchestrate } from './orchestrate.js';

/** Values near each quick check's edges, beside whatever fast-check makes up. */
const edges: unknown[] = [
  '',
  'a',
  'x'.repeat(MAX_SESSION_ID_LENGTH),
  'x'.repeat(MAX_SESSION_ID_LENGTH + 1),
  [],
  [{}],
  [{ role: 'user', content: 'hi' }, null],
  [{ role: 'user' }, 'text'],
  ['search', 'think'],
  ['search', 3],
  new Array(2), // holes
  Object.assign(new Array(3), { 0: 'search' }),
  true,
  false,
  0,
  null,
  undefined,
  {},
  () => undefined,
  new Map(),
];

describe("orchestrate()'s quick checks of options that are not objects", () => {
  for (const [key, quick] of Object.entries(quickOptionChecks)) {
    it(`accept exactly what the schema of "${key}" accepts`, () => {
      const schema = orchestrateOptionSchemas[key as keyof typeof orchestrateOptionSchemas];
      for (const value of edges)
        expect([key, value, quick(value)]).toEqual([key, value, schema.safeParse(value).success]);
      fc.assert(
        fc.property(
          fc.oneof(fc.anything({ withSparseArray: true }), fc.array(fc.anything()), fc.string({ maxLength: 3 })),
          (value) => {
            expect(quick(value)).toBe(schema.safeParse(value).success);
          },
        ),
        { numRuns: 500 },
      );
    });
  }
});

describe("orchestrate()'s manager, once a turn's options passed", () => {
  const config: OrchestrationConfig = { steps: [{ name: 'Any', isDefault: true }] };
  const tools = { search: tool({ inputSchema: z.object({ q: z.string() }), execute: async () => 'ok' }) };
  const notAManager = /manager: expected an OrchestrationManager/;

  it('refuses an object that is not a manager, whatever passed before', () => {
    const manager = createOrchestrationManager();
    expect(() => orchestrate({ manager, config, sessionId: 's', tools })).not.toThrow();
    expect(() => orchestrate({ manager, config, sessionId: 's', tools })).not.toThrow(); // the cached path
    const fake = { plan: () => undefined } as unknown as typeof manager;
    expect(() => orchestrate({ manager: fake, config, sessionId: 's', tools })).toThrow(notAManager);
    // Objects that passed as other options are not managers for it.
    for (const other of [config, tools] as unknown as (typeof manager)[]) {
      expect(() => orchestrate({ manager: other, config, sessionId: 's', tools })).toThrow(notAManager);
    }
  });
});
