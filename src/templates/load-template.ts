/**
 * Reading a template file: the only template code that touches the file system.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { BatonError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { TemplateConfigError, type TemplateIssue, TemplateIssueCode } from '../core/template-issues.js';
import { parseTemplate, type ValidateTemplateOptions } from '../core/validate-template.js';

/** Reads, parses and validates the template at `path`; errors name the file. */
export async function loadTemplate(path: string, options: ValidateTemplateOptions = {}): Promise<AgentTemplate> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new TemplateConfigError([unreadableFileIssue(path, error)], path);
  }
  try {
    return parseTemplate(text, { ...options, file: path });
  } catch (error) {
    if (BatonError.isInstance(error)) throw error;
    throw new BatonError('template-config', `Cannot load template ${path}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/**
 * The issue of a template file that cannot be read: a missing file names the absolute path it
 * was looked for at (a relative path is taken from the working directory, which is often not the
 * folder the user has in mind).
 */
export function unreadableFileIssue(path: string, error: unknown): TemplateIssue {
  const code = (error as NodeJS.ErrnoException).code;
  const reason =
    code === 'ENOENT'
      ? `no such file (looked for ${resolve(path)})`
      : code === 'EISDIR'
        ? 'it is a directory'
        : error instanceof Error
          ? error.message
          : String(error);
  return {
    code: TemplateIssueCode.UnreadableFile,
    severity: 'error',
    path: '',
    message: `cannot read the file: ${reason}`,
  };
}
