import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SESSION_ID_LENGTH } from '../core/state.js';
import { orchestrateOptionSchemas, quickOptionChecks } from './check-orchestrate-options.js';

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
