/**
 * What every template check shares: the list their problems are collected in (every problem at
 * once, errors first), and the guards that read the raw data. The checks run on the data as
 * written, not on what the schema parsed, so that one broken part never hides the problems of
 * another: every read is guarded.
 */
import { formatPath, type TemplateIssue } from './template-issues.js';

/** A JSON path into the data being checked. */
export type Path = readonly PropertyKey[];
/** An object of the raw (unparsed) data. */
export type Raw = Record<string, unknown>;

/** True when `v` is a plain object (not null, not an array). */
export const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
/** True when `v` is a string. */
export const isString = (v: unknown): v is string => typeof v === 'string';

/** The problems found so far, each at its path; {@link IssueList.sorted} puts errors first. */
export class IssueList {
  readonly items: TemplateIssue[] = [];
  add(severity: 'error' | 'warning', code: TemplateIssue['code'], path: Path, message: string, hint?: string) {
    const issue: TemplateIssue = { code, severity, path: formatPath(path), message };
    if (hint !== undefined) issue.hint = hint;
    this.items.push(issue);
  }
  error(code: TemplateIssue['code'], path: Path, message: string, hint?: string) {
    this.add('error', code, path, message, hint);
  }
  warn(code: TemplateIssue['code'], path: Path, message: string, hint?: string) {
    this.add('warning', code, path, message, hint);
  }
  sorted(): TemplateIssue[] {
    // Errors first, then in document order of discovery (stable sort).
    return this.items
      .map((issue, i) => ({ issue, i }))
      .sort((a, b) => (a.issue.severity === b.issue.severity ? a.i - b.i : a.issue.severity === 'error' ? -1 : 1))
      .map((x) => x.issue);
  }
  get hasErrors() {
    return this.items.some((i) => i.severity === 'error');
  }
}
