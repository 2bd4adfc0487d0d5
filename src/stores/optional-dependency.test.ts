import { describe, expect, it } from 'vitest';
import { BatonError, MissingDependencyError } from '../core/errors.js';
import { loadNodeSqlite, loadOptionalDependency } from './optional-dependency.js';

describe('loadOptionalDependency', () => {
  it('loads an installed CommonJS package', () => {
    const ioredis = loadOptionalDependency<typeof import('ioredis')>('ioredis', 'The Redis store');
    expect(typeof ioredis.Redis).toBe('function');
  });

  it('loads an installed ES module package synchronously, as the same instance import() gives', async () => {
    const required = loadOptionalDependency<typeof import('@ai-sdk/openai')>('@ai-sdk/openai', 'The openai provider');
    const imported = await import('@ai-sdk/openai');
    expect(required.createOpenAI).toBe(imported.createOpenAI);
  });

  it('reports a package that is not installed with the command that installs it', () => {
    const attempt = () => loadOptionalDependency('baton-agents-no-such-package', 'The test store');
    expect(attempt).toThrow(MissingDependencyError);
    try {
      attempt();
    } catch (error) {
      expect(BatonError.isInstance(error)).toBe(true);
      expect(MissingDependencyError.isInstance(error)).toBe(true);
      const missing = error as MissingDependencyError;
      expect(missing.code).toBe('missing-dependency');
      expect(missing.packageName).toBe('baton-agents-no-such-package');
      expect(missing.message).toBe(
        'The test store needs the package "baton-agents-no-such-package", which is not installed: run `npm install baton-agents-no-such-package` in your app.',
      );
      expect(missing.cause).toBeInstanceOf(Error);
    }
  });
});

describe('loadNodeSqlite', () => {
  it('returns node:sqlite on this Node.js', () => {
    expect(typeof loadNodeSqlite().DatabaseSync).toBe('function');
  });
});
