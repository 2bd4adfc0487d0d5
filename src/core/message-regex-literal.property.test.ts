/**
 * `message_regex` searches a regex that is only words joined by `|` as text. These tests hold
 * that search to RE2's answer: on every character of the Basic Multilingual Plane, and on
 * random patterns and messages built to hit case folding's corners.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileRegex, foldAscii, literalAlternatives } from './conditions.js';

/** What the condition does with a literal pattern (see conditions.ts). */
function literalTest(source: string, flags: string, text: string): boolean {
  const words = literalAlternatives(source, flags.includes('i'));
  if (words === undefined) throw new Error(`not a literal pattern: ${source}`);
  const folded = flags.includes('i') ? foldAscii(text) : text;
  return words.some((word) => folded.includes(word));
}

describe('message_regex on words joined by |', () => {
  it('folds every character of the BMP to an ASCII letter exactly when RE2 does', () => {
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    const anyLetter = compileRegex('[a-z]', 'i');
    for (let code = 0x80; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue; // lone surrogates are not text
      const ch = String.fromCharCode(code);
      const folded = foldAscii(ch);
      const ascii = [...folded].filter((c) => letters.includes(c)).join('');
      if (anyLetter.test(ch)) {
        // RE2 folds it to a letter: the fold gives that letter and nothing else.
        expect({ ch, folded: ascii }).toEqual({
          ch,
          folded: letters.split('').find((l) => compileRegex(l, 'i').test(ch)),
        });
      } else {
        expect({ ch, folded: ascii }).toEqual({ ch, folded: '' });
      }
    }
  });

  it('answers as RE2 does on random patterns and messages', () => {
    const patternChars = fc.constantFrom(...'abkKsSiIzZ09 -,\'"!:@_/'.split(''));
    const word = fc.string({ unit: patternChars, maxLength: 6 });
    const pattern = fc.array(word, { minLength: 1, maxLength: 4 }).map((words) => words.join('|'));
    // Message characters: the pattern's own, their case variants, and the characters whose case
    // folding differs between engines (Kelvin sign, long s, dotted and dotless I, sharp s).
    const textChars = fc.constantFrom(
      ...'abkKsSiIzZ09 -,\'"!:@_/\u212a\u017f\u0130\u0131\u00df\u1e9e\u00e9\n'.split(''),
    );
    fc.assert(
      fc.property(
        pattern,
        fc.string({ unit: textChars, maxLength: 30 }),
        fc.constantFrom('i', '', 'im', 'is'),
        (source, text, flags) => {
          expect(literalTest(source, flags, text)).toBe(compileRegex(source, flags).test(text));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('takes only plain text: any regex syntax goes to RE2', () => {
    for (const source of ['a.b', 'a*', '^start', 'end$', '(a|b)', '[ab]', 'a\\b', 'a+', 'a?', 'a{2}', 'é']) {
      expect(literalAlternatives(source, true)).toBeUndefined();
    }
    expect(literalAlternatives('Research|how many', true)).toEqual(['research', 'how many']);
    expect(literalAlternatives('Research|how many', false)).toEqual(['Research', 'how many']);
  });
});
