import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TemplateConfigError } from '../core/template-issues.js';
import { loadTemplate } from './load-template.js';

describe('loadTemplate of a file it cannot read', () => {
  it('says the file is missing, and where it looked, not that its JSON is invalid', async () => {
    const cwd = process.cwd();
    const error = await loadTemplate('agents/no-such-agent.json').catch((caught: unknown) => caught);
    expect(TemplateConfigError.isInstance(error)).toBe(true);
    const { issues, message } = error as TemplateConfigError;
    expect(issues).toEqual([
      {
        code: 'unreadable_file',
        severity: 'error',
        path: '',
        message: `cannot read the file: no such file (looked for ${join(cwd, 'agents/no-such-agent.json')})`,
      },
    ]);
    expect(message).not.toContain('invalid_json');
  });

  it('says a folder is a folder', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'baton-load-'));
    try {
      const error = (await loadTemplate(dir).catch((caught: unknown) => caught)) as TemplateConfigError;
      expect(error.issues[0]).toMatchObject({
        code: 'unreadable_file',
        message: 'cannot read the file: it is a directory',
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
