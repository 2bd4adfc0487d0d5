import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SESSION_ID_LENGTH } from '../core/state.js';
import { orchestrateOptionSchemas, plainOptionChecks } from './check-orchestrate-options.js';

/** Values near every edge of the option schemas: strings around the length limits, arrays with holes. */
const values = fc.oneof(
  fc.anything(),
  fc.string({ maxLength: 3 }),
  fc.integer({ min: MAX_SESSION_ID_LENGTH - 1, max: MAX_SESSION_ID_LENGTH + 1 }).map((n) => 'x'.repeat(n)),
  fc.array(fc.oneof(fc.string(), fc.object(), fc.constant(null), fc.integer())),
  fc.sparseArray(fc.oneof(fc.string(), fc.object()), { maxLength: 4 }),
);

describe('orchestrate() options: the plain checks of every turn', () => {
  for (const [key, plain] of Object.entries(plainOptionChecks)) {
    it(`accept exactly what the schema of ${key} accepts`, () => {
      const schema = orchestrateOptionSchemas[key as keyof typeof orchestrateOptionSchemas];
      fc.assert(
        fc.property(values, (value) => {
          expect(plain(value)).toBe(schema.safeParse(value).success);
        }),
        { numRuns: 2000 },
      );
    });
  }
});
