import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkTemplateText, formatFileIssue, locateJson, painter } from './template-file.js';

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The offset of a 1-based line and column in `text`. */
function offsetOf(text: string, line: number, column: number): number {
  const lines = text.split('\n');
  return lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0) + column - 1;
}

describe('locateJson', () => {
  it('agrees with JSON.parse on what is valid, for valid JSON with one character changed (property)', () => {
    const mutated = fc
      .tuple(
        fc.json(),
        fc.nat(),
        fc.constantFrom('', ',', '}', ']', '"', ':', ' ', '0', '-', '.', 'e', 't', '\\', '\n'),
      )
      .map(([json, at, char]) => {
        const text = JSON.stringify(JSON.parse(json), null, 2);
        const i = at % (text.length + 1);
        return char === '' ? text.slice(0, i) + text.slice(i + 1) : text.slice(0, i) + char + text.slice(i);
      });
    fc.assert(
      fc.property(mutated, (text) => {
        expect(locateJson(text).ok).toBe(parses(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('locates every object member at its key and every element at its value (property)', () => {
    fc.assert(
      fc.property(fc.json(), (json) => {
        const text = JSON.stringify(JSON.parse(json), null, 2);
        const located = locateJson(text);
        expect(located.ok).toBe(true);
        if (!located.ok) return;
        for (const [path, { line, column }] of located.paths) {
          const char = text[offsetOf(text, line, column)];
          // A member's path points at its quoted key, an element's at its first character.
          expect(char, `${path} at ${line}:${column}`).toMatch(/["{[\-0-9tfn]/);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('says what is wrong and where, for the usual mistakes', () => {
    const cases: [string, string, number, number][] = [
      ['{\n  "a": [1, 2,]\n}', 'a trailing comma before "]" (JSON allows none)', 2, 13],
      ['{\n  "a": 1\n  "b": 2\n}', 'expected "," or "}" after a property value, found "\\""', 3, 3],
      ["{'a': 1}", 'expected a property name in double quotes, found "\'"', 1, 2],
      ['{"a": \'x\'}', 'strings must use double quotes, not single quotes', 1, 7],
      ['{"a": tru}', 'expected a value, found "tru" (JSON knows only true, false and null)', 1, 7],
      ['{"a": "x', 'unterminated string (missing closing ")', 1, 7],
      ['{"a": 01}', 'invalid number', 1, 7],
      ['{"a": 1} x', 'unexpected "x" after the end of the JSON value', 1, 10],
      ['', 'unexpected end of the input: a value is missing', 1, 1],
      ['{"a": "\\q"}', 'bad escape "\\q" in a string', 1, 8],
    ];
    for (const [text, message, line, column] of cases) {
      expect(locateJson(text), text).toEqual({ ok: false, message, position: { line, column } });
    }
  });
});

describe('checkTemplateText', () => {
  const text = [
    '{',
    '  "id": "t",',
    '  "tools": ["search"],',
    '  "orchestration": {',
    '    "steps": [',
    '      { "name": "a", "isDefault": true, "conditons": [] },',
    '      { "name": "b", "conditions": [{ "type": "tool_used" }] }',
    '    ]',
    '  }',
    '}',
  ].join('\n');

  it('gives each issue the line and column of its key, or of the nearest enclosing value that exists', () => {
    const result = checkTemplateText(text, 'agent.json');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues.map((i) => [i.path, i.line, i.column])).toEqual([
      ['orchestration.steps[0].conditons', 6, 41], // the misspelled key itself
      ['orchestration.steps[1].conditions[0].value', 7, 37], // missing: the condition object
    ]);
    expect(formatFileIssue(result.issues[0]!)).toBe(
      'agent.json:6:41: error: orchestration.steps[0].conditons: unknown key "conditons" (known keys: name, description, isDefault, conditions, availableTools, sequence, requireSequence, resetSequenceOn, instructions, shadow, budget, rules) [unknown_key]\n  hint: did you mean "conditions"?',
    );
  });

  it('accepts a file that starts with a byte order mark', () => {
    expect(checkTemplateText(`\uFEFF${JSON.stringify({ id: 'bom' })}`, 'bom.json').ok).toBe(true);
  });

  it('colours severities only when asked', () => {
    const result = checkTemplateText('{"id": 1}', 'x.json');
    if (result.ok) throw new Error('expected issues');
    expect(formatFileIssue(result.issues[0]!, painter(true))).toContain('\u001b[31m');
    expect(formatFileIssue(result.issues[0]!, painter(false))).not.toContain('\u001b[');
  });
});
