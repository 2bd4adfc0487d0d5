/**
 * Paths in rules: `normalizePath()` and `isWithinPath(folder)` as functions (against Node's
 * POSIX path module, which resolves paths the same way), and in a rule judged by the transition,
 * where a text comparison of a path lets `..` through and these functions do not.
 */
import { posix } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileOrchestration } from './compile.js';
import { latestUserMessage } from './messages.js';
import { isPathWithin, normalizePath } from './rule-paths.js';
import { expressionProblemFor } from './rules.js';
import type { Rule } from './schema.js';
import { createState, type OrchestrationState } from './state.js';
import { type ToolDecision, transition } from './transition.js';
import { validateOrchestration } from './validate-template.js';

const ROOT = '/srv/work';

describe('normalizePath', () => {
  it.each([
    ['/srv/work/allowed/../other/x.txt', '/srv/work/other/x.txt'],
    ['/srv//work///allowed/', '/srv/work/allowed'],
    ['/srv/./work/./allowed/.', '/srv/work/allowed'],
    ['//srv/work', '/srv/work'],
    ['/..', '/'],
    ['/../../etc/passwd', '/etc/passwd'],
    ['/', '/'],
    ['///', '/'],
    ['a/b/../c', 'a/c'],
    ['a/../../b', '../b'],
    ['../../a/..', '../..'],
    ['./a/./', 'a'],
    ['a/..', '.'],
    ['', '.'],
    ['.', '.'],
    // Names, not navigation: filesystems do not decode these, and neither does the function.
    ['/srv/work/allowed/%2e%2e/x', '/srv/work/allowed/%2e%2e/x'],
    ['/srv/work/allowed/%2E%2E%2Fother', '/srv/work/allowed/%2E%2E%2Fother'],
    ['/srv/work/allowed/.../x', '/srv/work/allowed/.../x'],
    ['/srv/work/allowed/..x/y', '/srv/work/allowed/..x/y'],
    ['/srv/work/allowed/..\\other', '/srv/work/allowed/..\\other'],
  ])('%j is %j', (path, normal) => {
    expect(normalizePath(path)).toBe(normal);
  });
});

describe('isWithinPath', () => {
  it.each([
    ['/srv/work/allowed/x.txt', true],
    ['/srv/work/allowed', true], // the folder itself
    ['/srv/work/allowed/', true],
    ['/srv/work/allowed/sub/../x.txt', true],
    ['/srv/work/allowed//x.txt', true],
    ['/srv//work/allowed/x.txt', true],
    ['/srv/work/./allowed/./x.txt', true],
    ['/srv/work/other/../allowed/x.txt', true],
    ['/srv/work/allowed/../other/x.txt', false],
    ['/srv/work/allowed/..', false],
    ['/srv/work/allowed/sub/../../other', false],
    ['/srv/work/allowedX/x.txt', false],
    ['/srv/work/allowed.bak/x.txt', false],
    ['/srv/work', false],
    ['/srv/work/allowed/../../../../srv/work/allowed/x', true],
    // Relative: resolved from a directory the rule does not know, so never within an absolute folder.
    ['allowed/x.txt', false],
    ['srv/work/allowed/x.txt', false],
    ['', false],
    // Plain names for the filesystem: they stay inside.
    ['/srv/work/allowed/%2e%2e/other/x.txt', true],
    ['/srv/work/allowed/%2e%2e%2fother', true],
    ['/srv/work/allowed/..%2fother', true],
    ['/srv/work/allowed/...', true],
  ])('%j within /srv/work/allowed: %s', (path, within) => {
    expect(isPathWithin(path, '/srv/work/allowed')).toBe(within);
    expect(isPathWithin(path, '/srv/work/allowed/')).toBe(within);
    expect(isPathWithin(path, '/srv//work/./allowed')).toBe(within);
  });

  it('reads folders too: the root holds every absolute path, a relative folder only relative paths', () => {
    expect(isPathWithin('/etc/passwd', '/')).toBe(true);
    expect(isPathWithin('/', '/')).toBe(true);
    expect(isPathWithin('a/b', '.')).toBe(true);
    expect(isPathWithin('a/b', '')).toBe(true);
    expect(isPathWithin('../a', '.')).toBe(false);
    expect(isPathWithin('a/../../b', '.')).toBe(false);
    expect(isPathWithin('../a/b', '../a')).toBe(true);
    expect(isPathWithin('../../a', '..')).toBe(false);
    expect(isPathWithin('a', '..')).toBe(true);
    expect(isPathWithin('a', '../b')).toBe(false);
    expect(isPathWithin('a/b', 'a')).toBe(true);
    expect(isPathWithin('/a/b', 'a')).toBe(false);
  });

  // Segments that mean something to a filesystem, and names that look like them.
  const segmentArb = fc.constantFrom('a', 'b', 'ab', '.', '..', '', '...', '.a', 'a..', '%2e%2e', '\\');
  const pathArb = fc
    .tuple(fc.boolean(), fc.array(segmentArb, { maxLength: 10 }), fc.boolean())
    .map(([absolute, segments, trailing]) => `${absolute ? '/' : ''}${segments.join('/')}${trailing ? '/' : ''}`);

  it('normalises as POSIX does (Node’s path.posix), but for a trailing /', () => {
    fc.assert(
      fc.property(pathArb, (path) => {
        const expected = posix.normalize(path);
        expect(normalizePath(path)).toBe(expected.length > 1 ? expected.replace(/\/+$/, '') : expected);
      }),
      { numRuns: 5_000 },
    );
  });

  it('says a path is within a folder exactly when resolving both from one directory does', () => {
    // Deeper than any path climbs, so that resolving never reaches the root.
    const base = `/${Array.from({ length: 12 }, (_, i) => `d${i}`).join('/')}`;
    fc.assert(
      fc.property(pathArb, pathArb, (path, folder) => {
        const within = isPathWithin(path, folder);
        if (posix.isAbsolute(path) !== posix.isAbsolute(folder)) {
          expect(within, `${path} in ${folder}`).toBe(false);
        } else {
          const relative = posix.relative(posix.resolve(base, folder), posix.resolve(base, path));
          expect(within, `${path} in ${folder}: ${relative}`).toBe(
            relative === '' || (relative !== '..' && !relative.startsWith('../')),
          );
        }
      }),
      { numRuns: 5_000 },
    );
  });

  it('takes time linear in the length of the path', () => {
    const climb = `/${'a/'.repeat(200_000)}${'../'.repeat(200_000)}x`;
    const started = performance.now();
    expect(isPathWithin(climb, '/x')).toBe(true);
    expect(normalizePath(climb)).toBe('/x');
    expect(isPathWithin(`/${'%2e%2e/'.repeat(100_000)}x`, '/')).toBe(true);
    // 2.4 MB of path: a few tens of milliseconds; quadratic work would take minutes.
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe('paths in rules', () => {
  const message = latestUserMessage([{ role: 'user', content: 'write it', id: 'm1' }]);
  const TOOLS = ['write_file'];
  /** The decision on `write_file` at `path` under `rule`. */
  const decide = (rule: Rule, path: unknown): ToolDecision => {
    const plan = compileOrchestration({ rules: [rule], steps: [{ name: 'Work', isDefault: true }] });
    let state: OrchestrationState = createState('s', 0);
    state = transition(plan, state, { type: 'user-message' }, { now: 1, message }).state;
    const input = { type: 'tool-requested' as const, tool: 'write_file', toolCallId: 'c', agentTools: TOOLS };
    return transition(plan, state, { ...input, args: { path, content: 'x' } }, { now: 1, message })
      .decision as ToolDecision;
  };
  const confined: Rule = {
    tools: ['write_file'],
    when: `!args.path.isWithinPath('${ROOT}/allowed')`,
    effect: 'deny',
    reason: 'Write only under allowed/',
  };

  it('refuses what leaves the folder through .., however it is written, and lets the rest through', () => {
    const refused = [
      `${ROOT}/allowed/../other/x.txt`,
      `${ROOT}/allowed//../other/x.txt`,
      `${ROOT}/allowed/./../other/x.txt`,
      `${ROOT}/allowed/sub/../../other/x.txt`,
      `${ROOT}/allowedX/x.txt`,
      `${ROOT}/other/x.txt`,
      'allowed/x.txt', // relative: the rule cannot know where it resolves
    ];
    for (const path of refused) {
      expect(decide(confined, path), path).toMatchObject({
        allowed: false,
        reason: { code: 'rule', rule: 'rules[0]', effect: 'deny', message: 'Write only under allowed/' },
      });
    }
    const allowed = [
      `${ROOT}/allowed/x.txt`,
      `${ROOT}//allowed//x.txt`,
      `${ROOT}/./allowed/./x.txt`,
      `${ROOT}/allowed/sub/../x.txt`,
      // Names the filesystem does not decode: inside the folder.
      `${ROOT}/allowed/%2e%2e/other/x.txt`,
      `${ROOT}/allowed/..%2fother/x.txt`,
    ];
    for (const path of allowed) expect(decide(confined, path), path).toMatchObject({ allowed: true });
  });

  it('is what a text comparison gets wrong: startsWith lets .. through', () => {
    const text: Rule = { ...confined, when: `!args.path.startsWith('${ROOT}/allowed/')` };
    expect(decide(text, `${ROOT}/allowed/../other/x.txt`)).toMatchObject({ allowed: true });
    expect(decide(confined, `${ROOT}/allowed/../other/x.txt`)).toMatchObject({ allowed: false });
    const normalised: Rule = { ...confined, when: `!args.path.normalizePath().startsWith('${ROOT}/allowed/')` };
    expect(decide(normalised, `${ROOT}/allowed/../other/x.txt`)).toMatchObject({ allowed: false });
    expect(decide(normalised, `${ROOT}/allowed/./x.txt`)).toMatchObject({ allowed: true });
  });

  it('refuses a path that is not a string (fail closed), saying why', () => {
    expect(decide(confined, 7)).toMatchObject({
      allowed: false,
      reason: { code: 'rule', message: expect.stringMatching(/rules\[0\] could not be evaluated \(.*isWithinPath/) },
    });
  });

  it('type-checks the functions when the template loads and against the tool’s input schema', () => {
    const problems = (when: string) => {
      const result = validateOrchestration({
        rules: [{ tools: ['write_file'], when, effect: 'deny', reason: 'r' }],
        steps: [{ name: 'S', isDefault: true }],
      });
      return result.success ? [] : result.issues.map((issue) => `${issue.path}: ${issue.message}`);
    };
    expect(problems("!args.path.isWithinPath('/srv')")).toEqual([]);
    expect(problems("args.path.normalizePath() == '/srv'")).toEqual([]);
    expect(problems("args.path.isWithin('/srv')")).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: .*no matching overload for 'dyn\.isWithin\(string\)'/),
    ]);
    expect(problems('args.path.isWithinPath()')).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: .*isWithinPath\(\)/),
    ]);
    expect(problems("'/srv/a'.isWithinPath(1)")).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: .*string\.isWithinPath\(int\)/),
    ]);
    expect(problems('args.path.normalizePath() == 3')).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: .*string == int/),
    ]);
    const schema = { type: 'object', properties: { path: { type: 'string' }, depth: { type: 'integer' } } };
    expect(expressionProblemFor("!args.path.isWithinPath('/srv')", schema)).toBeUndefined();
    expect(expressionProblemFor('!args.path.isWithinPath(1)', schema)).toMatch(/string\.isWithinPath\(int\)/);
    expect(expressionProblemFor("args.depth.isWithinPath('/srv')", schema)).toMatch(/int\.isWithinPath/);
  });
});
