/**
 * Reading a template file: the only template code that touches the file system.
 */
import { readFile } from 'node:fs/promises';
import { BatonError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { TemplateConfigError, TemplateIssueCode } from '../core/template-issues.js';
import { parseTemplate, type ValidateTemplateOptions } from '../core/validate-template.js';

/** Reads, parses and validates the template at `path`; errors name the file. */
export async function loadTemplate(path: string, options: ValidateTemplateOptions = {}): Promise<AgentTemplate> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new TemplateConfigError(
      [
        {
          code: TemplateIssueCode.InvalidJson,
          severity: 'error',
          path: '',
          message: `cannot read the file: ${reason}`,
        },
      ],
      path,
    );
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
