/**
 * Reading a template file for the CLI commands: like `loadTemplate`, but never throws, and
 * every issue gets the line and column of the place it names in the file (a JSON syntax
 * error, the key or value at an issue's JSON path), so a terminal or editor can jump there.
 */
import { readFile } from 'node:fs/promises';
import { styleText } from 'node:util';
import type { AgentTemplate } from '../core/schema.js';
import { formatPath, type TemplateIssue, TemplateIssueCode } from '../core/template-issues.js';
import { type ValidateTemplateOptions, validateTemplate } from '../core/validate-template.js';
import { unreadableFileIssue } from '../templates/load-template.js';

/** A line and column in a text, both from 1. */
export interface TextPosition {
  line: number;
  column: number;
}

/** A template issue located in its file. */
export interface FileIssue extends TemplateIssue {
  file: string;
  /** Where in the file, when the issue's path (or an ancestor of it) exists there. */
  line?: number;
  column?: number;
}

/** A template file read and validated: the template and its warnings, or every issue. */
export type TemplateFileResult =
  | { ok: true; file: string; template: AgentTemplate; warnings: FileIssue[] }
  | { ok: false; file: string; issues: FileIssue[] };

/** Reads and validates the template at `file`; never throws. */
export async function readTemplateFile(
  file: string,
  options: ValidateTemplateOptions = {},
): Promise<TemplateFileResult> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    return { ok: false, file, issues: [{ file, ...unreadableFileIssue(file, error) }] };
  }
  return checkTemplateText(text, file, options);
}

/** Validates template JSON text that came from `file`; never throws. */
export function checkTemplateText(
  text: string,
  file: string,
  options: ValidateTemplateOptions = {},
): TemplateFileResult {
  // Editors save a byte order mark now and then; JSON.parse rejects it, people do not see it.
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  let data: unknown;
  try {
    data = JSON.parse(source);
  } catch (error) {
    return { ok: false, file, issues: [jsonSyntaxIssue(source, file, (error as Error).message)] };
  }
  const located = locateJson(source);
  const locate = (issue: TemplateIssue): FileIssue => {
    const at = located.ok ? positionOfPath(located.paths, issue.path) : undefined;
    return at ? { ...issue, file, line: at.line, column: at.column } : { ...issue, file };
  };
  const result = validateTemplate(data, options);
  return result.success
    ? { ok: true, file, template: result.template, warnings: result.warnings.map(locate) }
    : { ok: false, file, issues: result.issues.map(locate) };
}

/** The issue for JSON text that does not parse, with the line and column of the mistake. */
export function jsonSyntaxIssue(text: string, file: string, parseMessage: string): FileIssue {
  const issue: FileIssue = { file, code: TemplateIssueCode.InvalidJson, severity: 'error', path: '', message: '' };
  const located = locateJson(text);
  if (!located.ok) {
    issue.message = `not valid JSON: ${located.message}`;
    issue.line = located.position.line;
    issue.column = located.position.column;
    return issue;
  }
  // Our reader found nothing wrong where V8 did: keep V8's words and its position, if it gave one.
  const v8 = /\(line (\d+) column (\d+)\)/.exec(parseMessage);
  issue.message = `not valid JSON: ${parseMessage.replace(/\s+in JSON at position \d+.*$/s, '')}`;
  if (v8) {
    issue.line = Number(v8[1]);
    issue.column = Number(v8[2]);
  }
  return issue;
}

// ---------------------------------------------------------------------------------------
// A JSON reader that remembers where every value is, and where the first mistake is.

/** Where each value is (keyed by formatted JSON path; object members by their key), or the first mistake. */
export type JsonLocations =
  | { ok: true; paths: Map<string, TextPosition> }
  | { ok: false; message: string; position: TextPosition };

const LITERAL = /true|false|null/y;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

class JsonMistake extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

/** Reads `text` as JSON (RFC 8259), recording the position of every value; never throws. */
export function locateJson(text: string): JsonLocations {
  const paths = new Map<string, TextPosition>();
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) lineStarts.push(i + 1);
  const at = (offset: number): TextPosition => {
    let low = 0;
    let high = lineStarts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (lineStarts[mid]! <= offset) low = mid;
      else high = mid - 1;
    }
    return { line: low + 1, column: offset - lineStarts[low]! + 1 };
  };
  let i = 0;
  const describe = (offset: number) =>
    offset >= text.length ? 'the end of the input' : `${JSON.stringify(text[offset])}`;
  const skipSpace = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const expectChar = (char: string, what: string) => {
    if (text[i] !== char) throw new JsonMistake(`expected ${what}, found ${describe(i)}`, i);
    i++;
  };
  /** Steps over a comma; one right before the closing bracket is the commonest JSON mistake. */
  const trailingComma = (close: string) => {
    const comma = i;
    i++;
    skipSpace();
    if (text[i] === close) throw new JsonMistake(`a trailing comma before "${close}" (JSON allows none)`, comma);
  };
  const readString = (): string => {
    const start = i;
    i++; // the opening quote
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return JSON.parse(text.slice(start, i)) as string;
      }
      if (c < 0x20) throw new JsonMistake('a control character (such as a line break) inside a string', i);
      if (c === 0x5c) {
        const e = text[i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6)))
            throw new JsonMistake('bad \\u escape: needs 4 hex digits', i);
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else throw new JsonMistake(`bad escape "\\${e ?? ''}" in a string`, i);
      } else i++;
    }
    throw new JsonMistake('unterminated string (missing closing ")', start);
  };
  const readValue = (path: PropertyKey[]): void => {
    skipSpace();
    const start = i;
    paths.set(formatPath(path), at(start));
    const c = text[i];
    if (c === '{') {
      i++;
      skipSpace();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        skipSpace();
        if (text[i] !== '"')
          throw new JsonMistake(`expected a property name in double quotes, found ${describe(i)}`, i);
        const keyAt = i;
        const key = readString();
        skipSpace();
        expectChar(':', '":" after the property name');
        readValue([...path, key]);
        // Keep the key's position: for "unknown key" issues the key is the place to look.
        paths.set(formatPath([...path, key]), at(keyAt));
        skipSpace();
        if (text[i] === ',') {
          trailingComma('}');
          continue;
        }
        expectChar('}', '"," or "}" after a property value');
        return;
      }
    }
    if (c === '[') {
      i++;
      skipSpace();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (let index = 0; ; index++) {
        readValue([...path, index]);
        skipSpace();
        if (text[i] === ',') {
          trailingComma(']');
          continue;
        }
        expectChar(']', '"," or "]" after an array element');
        return;
      }
    }
    if (c === '"') {
      readString();
      return;
    }
    LITERAL.lastIndex = i;
    if (LITERAL.test(text)) {
      i = LITERAL.lastIndex;
      return;
    }
    NUMBER.lastIndex = i;
    if (NUMBER.test(text)) {
      if (/[0-9.eE+-]/.test(text[NUMBER.lastIndex] ?? '')) throw new JsonMistake('invalid number', i);
      i = NUMBER.lastIndex;
      return;
    }
    if (c === undefined) throw new JsonMistake('unexpected end of the input: a value is missing', i);
    if (c === "'") throw new JsonMistake('strings must use double quotes, not single quotes', i);
    const word = /^[A-Za-z_$][\w$]*/.exec(text.slice(i, i + 64))?.[0];
    if (word !== undefined) {
      throw new JsonMistake(
        `expected a value, found ${JSON.stringify(word)} (JSON knows only true, false and null)`,
        i,
      );
    }
    throw new JsonMistake(`expected a value, found ${describe(i)}`, i);
  };
  try {
    readValue([]);
    skipSpace();
    if (i < text.length) throw new JsonMistake(`unexpected ${describe(i)} after the end of the JSON value`, i);
    return { ok: true, paths };
  } catch (error) {
    // Nesting too deep for this recursive reader: the positions found so far are kept, and
    // whether the text is valid is left to JSON.parse.
    if (error instanceof RangeError) return { ok: true, paths };
    if (!(error instanceof JsonMistake)) throw error;
    return { ok: false, message: error.message, position: at(error.offset) };
  }
}

/** The position of `path`, or of its nearest ancestor that exists in the file. */
function positionOfPath(paths: Map<string, TextPosition>, path: string): TextPosition | undefined {
  let current = path;
  for (;;) {
    const hit = paths.get(current);
    if (hit !== undefined) return hit;
    if (current === '') return undefined;
    // Drop the last segment: `.key`, `[3]`, `["odd key"]` or a leading `key`.
    current = current.replace(/(?:\.[A-Za-z_$][\w$]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\]|^[A-Za-z_$][\w$]*)$/, '');
  }
}

// ---------------------------------------------------------------------------------------
// Printing

/** Colours text when a terminal shows it (see {@link wantsColor}); identity otherwise. */
export type Paint = (format: Parameters<typeof styleText>[0], text: string) => string;

/** True when `stream` is a terminal and `NO_COLOR` is not set (https://no-color.org). */
export function wantsColor(stream: { isTTY?: boolean }, env: Readonly<Record<string, string | undefined>>): boolean {
  return stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === '');
}

/** A {@link Paint} that colours, or one that leaves text alone. */
export function painter(color: boolean): Paint {
  return color ? (format, text) => styleText(format, text, { validateStream: false }) : (_, text) => text;
}

/** `file:3:14: error: orchestration.steps[0].name: … [code]` and an indented hint line. */
export function formatFileIssue(issue: FileIssue, paint: Paint = painter(false)): string {
  const where = issue.line === undefined ? issue.file : `${issue.file}:${issue.line}:${issue.column}`;
  const severity = issue.severity === 'error' ? paint(['bold', 'red'], 'error') : paint(['bold', 'yellow'], 'warning');
  const path = issue.path === '' ? '' : `${paint('cyan', issue.path)}: `;
  const hint = issue.hint === undefined ? '' : `\n  ${paint('dim', 'hint:')} ${issue.hint}`;
  return `${where}: ${severity}: ${path}${issue.message} ${paint('dim', `[${issue.code}]`)}${hint}`;
}
