import { describe, expect, it, vi } from 'vitest';
import { MissingDependencyError } from '../core/errors.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';

// @opentelemetry/api is a dev dependency here, so its absence is simulated where Baton loads
// optional packages: exactly what an app without it gets from that loader.
vi.mock('../stores/optional-dependency.js', () => ({
  loadOptionalDependency: (name: string, feature: string) => {
    throw new MissingDependencyError(name, feature, {
      cause: Object.assign(new Error('absent'), { code: 'MODULE_NOT_FOUND' }),
    });
  },
}));

const { createTelemetry } = await import('./otel.js');
const { startOtelExport } = await import('./otel-node.js');

describe('without @opentelemetry/api', () => {
  it('records nothing and fails nothing', async () => {
    const telemetry = createTelemetry();
    expect(telemetry.enabled).toBe(false);
    expect(MissingDependencyError.isInstance(telemetry.unavailable)).toBe(true);
    const errors: unknown[] = [];
    const manager = createOrchestrationManager({ onError: (error) => errors.push(error) });
    telemetry.instrument(manager);
    const config = { steps: [{ name: 'Only', isDefault: true, sequence: ['search'] }] };
    expect(await manager.getAllowedTools(config, [], 's', ['search', 'think'])).toEqual(['search']);
    expect(errors).toEqual([]);
  });

  it('createApp({ telemetry }) serves as it would without it', async () => {
    const { createApp } = await import('../server/create-app.js');
    const app = createApp({
      agents: [{ id: 'a', tools: ['search'] }],
      model: 'offline',
      webRoot: false,
      telemetry: { recordContent: false },
    });
    try {
      const response = await app.request('/api/chat/a', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ id: 'm', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] }),
      });
      expect(response.status).toBe(200);
      expect(await response.text()).toContain('"type":"finish"');
    } finally {
      await app.close();
    }
  });

  it('baton serve --otel names every missing package in one install command', () => {
    let thrown: unknown;
    try {
      startOtelExport({ env: {} });
    } catch (error) {
      thrown = error;
    }
    expect(MissingDependencyError.isInstance(thrown)).toBe(true);
    expect((thrown as Error).message).toContain(
      'npm install @opentelemetry/api @opentelemetry/sdk-trace @opentelemetry/context-async-hooks @opentelemetry/resources @opentelemetry/exporter-trace-otlp-http @opentelemetry/core @opentelemetry/instrumentation-http',
    );
  });
});
