import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The inspector's components are tested as React renders them (web/src/*.test.tsx).
  oxc: { jsx: { runtime: 'automatic' } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'web/src/**/*.test.tsx'],
    // Says which suites a bare clone skips (AgentDock's templates live outside the repository).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
