/**
 * Template problems: every one carries a code, a severity, a JSON path and a message, and
 * the throwing forms raise one {@link TemplateConfigError} that carries them all.
 */
import { closest, distance } from 'fastest-levenshtein';
import { BatonError } from './errors.js';

/** Codes of template problems. */
export const TemplateIssueCode = {
  UnreadableFile: 'unreadable_file',
  InvalidJson: 'invalid_json',
  InvalidType: 'invalid_type',
  InvalidValue: 'invalid_value',
  UnknownKey: 'unknown_key',
  MissingId: 'missing_id',
  MissingValue: 'missing_value',
  UnexpectedField: 'unexpected_field',
  DuplicateStep: 'duplicate_step',
  MultipleDefaults: 'multiple_defaults',
  UnknownDefaultStep: 'unknown_default_step',
  UnknownConditionType: 'unknown_condition_type',
  SequenceMatchWithoutSequence: 'sequence_match_without_sequence',
  InvalidCondition: 'invalid_condition',
  InvalidRegex: 'invalid_regex',
  InvalidPattern: 'invalid_pattern',
  /** An annotation selector that does not exist (`@readonly` for `@readOnly`). */
  UnknownSelector: 'unknown_selector',
  /** An annotation selector where one concrete tool must be named (a sequence, a condition's tool). */
  SelectorNotAllowed: 'selector_not_allowed_here',
  SequenceToolNotPermitted: 'sequence_tool_not_permitted',
  UnknownTool: 'unknown_tool',
  InvalidResetRule: 'invalid_reset_rule',
  UnreachableStep: 'unreachable_step',
  ShadowedStep: 'shadowed_step',
  HistoryTooShort: 'history_too_short',
  IgnoredValue: 'ignored_value',
  InvalidRule: 'invalid_rule',
  InvalidExpression: 'invalid_expression',
  DuplicateId: 'duplicate_id',
} as const;

/** One of {@link TemplateIssueCode}. */
export type TemplateIssueCode = (typeof TemplateIssueCode)[keyof typeof TemplateIssueCode];

/** One problem found in a template. */
export interface TemplateIssue {
  code: TemplateIssueCode;
  /** Errors stop the template from loading; warnings are reported only. */
  severity: 'error' | 'warning';
  /** JSON path, e.g. `orchestration.steps[2].conditions[0].value` (empty for the whole document). */
  path: string;
  message: string;
  /** What to do about it, e.g. a "did you mean" suggestion. */
  hint?: string;
}

/**
 * A template that failed validation, or the options of a factory that takes templates
 * (`createApp`, `createAgent`, `orchestrate`, `OrchestratedAgent`), checked when it is created;
 * `issues` lists every problem (errors and warnings), each with its path.
 */
export class TemplateConfigError extends BatonError {
  /** Every problem found, errors first. */
  readonly issues: readonly TemplateIssue[];
  /** The file the template came from, when known. */
  readonly file: string | undefined;

  /** `subject`: what was checked, for the first line (default `agent template`). */
  constructor(issues: readonly TemplateIssue[], file?: string, subject?: string) {
    super('template-config', formatIssues(issues, file, subject));
    this.name = 'TemplateConfigError';
    this.issues = issues;
    this.file = file;
  }

  /** True for a {@link TemplateConfigError} from any copy of the package. */
  static override isInstance(error: unknown): error is TemplateConfigError {
    return BatonError.isInstance(error) && error.code === 'template-config';
  }
}

/** A multi-line, human-readable list of issues, headed by what was checked and the file when known. */
export function formatIssues(issues: readonly TemplateIssue[], file?: string, subject = 'agent template'): string {
  const errors = issues.filter((i) => i.severity === 'error').length;
  const warnings = issues.length - errors;
  const counts = [plural(errors, 'error'), warnings ? plural(warnings, 'warning') : ''].filter(Boolean).join(', ');
  const head = `Invalid ${subject}${file ? ` ${file}` : ''} (${counts}):`;
  const lines = issues.map((i) => {
    const where = i.path === '' ? '(template)' : i.path;
    return `  - ${i.severity === 'warning' ? 'warning: ' : ''}${where}: ${i.message} [${i.code}]${i.hint ? `\n    hint: ${i.hint}` : ''}`;
  });
  return [head, ...lines].join('\n');
}

function plural(n: number, word: string) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** Formats a path array as `a.b[2].c`; keys that are not identifiers are quoted. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else {
      const key = String(part);
      out += /^[A-Za-z_$][\w$]*$/.test(key) ? (out === '' ? key : `.${key}`) : `[${JSON.stringify(key)}]`;
    }
  }
  return out;
}

/** Names longer than this get no "did you mean" hint. */
const MAX_HINT_LENGTH = 128;

/** A "did you mean" hint when `input` is close to one of `candidates`. */
export function didYouMean(input: string, candidates: readonly string[]): string | undefined {
  // Edit distance is quadratic in the lengths: a typo hint is only useful for names of
  // ordinary length, and a huge name must not stall validation.
  const usable = candidates.filter((c) => c.length <= MAX_HINT_LENGTH);
  if (usable.length === 0 || input.length > MAX_HINT_LENGTH) return undefined;
  const best = closest(input, usable);
  const limit = Math.max(2, Math.floor(best.length / 3));
  return distance(input.toLowerCase(), best.toLowerCase()) <= limit ? `did you mean "${best}"?` : undefined;
}
