/**
 * `baton validate <template.json...>`: checks templates the way loading them would, and
 * prints every problem of every file with its place (file:line:column and JSON path), so a
 * template can be checked in CI before an agent ever loads it.
 */
import type { Writable } from 'node:stream';
import { Command } from 'commander';
import type { CliContext } from './program.js';
import {
  type FileIssue,
  formatFileIssue,
  type Paint,
  painter,
  readTemplateFile,
  type TemplateFileResult,
  wantsColor,
} from './template-file.js';

/** Exit codes of {@link runValidate}. */
export const ValidateExitCode = {
  /** Every file is valid (warnings allowed). */
  ok: 0,
  /** Some file has an error or cannot be read. */
  invalid: 1,
} as const;

/** Options of {@link runValidate}. */
export interface ValidateOptions {
  files: readonly string[];
  /** One JSON document instead of text. */
  json?: boolean;
  output: Writable & { isTTY?: boolean };
  env: Readonly<Record<string, string | undefined>>;
}

/** The machine-readable report of `baton validate --json`. */
export interface ValidateReport {
  valid: boolean;
  errors: number;
  warnings: number;
  files: { file: string; valid: boolean; errors: number; warnings: number; issues: FileIssue[] }[];
}

/** Validates every file, prints the report, and resolves to the exit code (see {@link ValidateExitCode}). */
export async function runValidate(options: ValidateOptions): Promise<number> {
  const results = await Promise.all(options.files.map((file) => readTemplateFile(file)));
  const report = toReport(results);
  if (options.json) {
    options.output.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    options.output.write(formatReport(results, report, painter(wantsColor(options.output, options.env))));
  }
  return report.valid ? ValidateExitCode.ok : ValidateExitCode.invalid;
}

function toReport(results: readonly TemplateFileResult[]): ValidateReport {
  const files = results.map((r) => {
    const issues = r.ok ? r.warnings : r.issues;
    const errors = issues.filter((i) => i.severity === 'error').length;
    return { file: r.file, valid: r.ok, errors, warnings: issues.length - errors, issues };
  });
  return {
    valid: files.every((f) => f.valid),
    errors: files.reduce((n, f) => n + f.errors, 0),
    warnings: files.reduce((n, f) => n + f.warnings, 0),
    files,
  };
}

function formatReport(results: readonly TemplateFileResult[], report: ValidateReport, paint: Paint): string {
  const lines: string[] = [];
  for (const result of results) {
    if (result.ok) {
      const steps = result.template.orchestration?.steps.length ?? 0;
      const what = steps === 0 ? 'no orchestration' : `${plural(steps, 'step')}`;
      const warned = result.warnings.length ? `, ${plural(result.warnings.length, 'warning')}` : '';
      lines.push(`${paint('green', '✓')} ${result.file} ${paint('dim', `(${what}${warned})`)}`);
      for (const issue of result.warnings) lines.push(indent(formatFileIssue(issue, paint)));
    } else {
      lines.push(`${paint('red', '✗')} ${result.file}`);
      for (const issue of result.issues) lines.push(indent(formatFileIssue(issue, paint)));
    }
  }
  const invalid = report.files.filter((f) => !f.valid).length;
  const counts = `${plural(report.errors, 'error')}, ${plural(report.warnings, 'warning')}`;
  const head = `${plural(report.files.length, 'file')}${invalid ? ` (${invalid} invalid)` : ''}`;
  lines.push(paint(report.valid ? 'green' : ['bold', 'red'], `${head}: ${counts}`));
  return `${lines.join('\n')}\n`;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** `baton validate <template.json...> [--json]`. */
export function validateCommand(context: CliContext): Command {
  return new Command('validate')
    .description('Check agent templates: every problem with its file:line:column, JSON path and a hint.')
    .argument('<templates...>', 'paths of agent templates (JSON)')
    .option('--json', 'print one JSON report instead of text')
    .addHelpText(
      'after',
      [
        '',
        'Exit codes:',
        '  0  every template is valid (warnings, such as a step that can never become active, are allowed)',
        '  1  some template has an error or cannot be read',
        '',
        'Examples:',
        '  baton validate examples/agents/*.json',
        '  baton validate agent.json --json | jq .files[0].issues',
      ].join('\n'),
    )
    .action(async (files: string[], flags: { json?: boolean }) => {
      context.setExitCode(
        await runValidate({
          files,
          json: flags.json === true,
          output: context.stdout as Writable & { isTTY?: boolean },
          env: context.env,
        }),
      );
    });
}
