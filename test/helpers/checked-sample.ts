/**
 * The code lines of a documentation sample that a test checks itself (`<!-- sample: checked-by
 * <test> -->` on the line before its fence; test/docs-samples.test.ts makes sure the test exists).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;

/**
 * The trimmed lines of the first `ts` sample of `doc` (relative to the repository) marked as
 * checked by `test`, without blank lines, comments and `...` elisions: what the test then finds,
 * line by line, in the file the sample is taken from. Throws when there is no such sample.
 */
export function checkedSampleLines(doc: string, test: string): string[] {
  const text = readFileSync(join(ROOT, doc), 'utf8');
  const start = text.indexOf(`<!-- sample: checked-by ${test} -->`);
  if (start < 0) throw new Error(`${doc} has no sample marked "checked-by ${test}"`);
  const fence = text.indexOf('```ts', start);
  const sample = text.slice(fence + 5, text.indexOf('```', fence + 5));
  return sample
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('//') && line !== '...');
}
