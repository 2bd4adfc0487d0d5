/**
 * One code, one status: the table covers every code, every error Baton throws answers with the
 * status of its code, and the same condition answers the same status whichever store has it.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { TypeValidationError } from 'ai';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { pingPostgres, serviceAvailable } from '../../test/helpers/services.js';
import { MissingApiKeyError } from '../ai-sdk/core-llm.js';
import { ToolRejectedError } from '../ai-sdk/orchestrate.js';
import {
  BatonError,
  type BatonErrorCode,
  InvalidArgumentError,
  SessionRefusedError,
  StoreClosedError,
  StoreConflictError,
  StoreUnavailableError,
} from '../core/errors.js';
import { TemplateConfigError } from '../core/template-issues.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { POSTGRES_SCHEMA_VERSION, postgresStore } from '../stores/postgres.js';
import { DEFAULT_SQLITE_TABLE, SQLITE_SCHEMA_VERSION, sqliteStore } from '../stores/sqlite.js';
import { StateTokenError } from '../stores/state-token.js';
import { loadTemplate } from '../templates/load-template.js';
import type { ApiErrorBody } from './api-types.js';
import { type BatonApp, createApp } from './create-app.js';
import { errorResponse, HTTP_STATUS_BY_CODE, HttpError, httpStatusOf } from './http-errors.js';

const reasoner = await loadTemplate(new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const skipPostgres = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('the status table', () => {
  it('gives every code a status, and 4xx only to codes about the request', () => {
    for (const [code, status] of Object.entries(HTTP_STATUS_BY_CODE)) {
      expect([400, 401, 403, 404, 405, 409, 413, 429, 500, 503], code).toContain(status);
    }
    expect(httpStatusOf('stale-state-token')).toBe(409);
    expect(httpStatusOf('session-busy')).toBe(429);
    expect(httpStatusOf('server-busy')).toBe(503);
    expect(httpStatusOf('invalid-history')).toBe(400);
    expect(httpStatusOf('store-closed')).toBe(503);
    expect(httpStatusOf('store-schema-mismatch')).toBe(503);
    expect(httpStatusOf('template-config')).toBe(500);
  });

  it('answers every error with the status of its code, whatever class threw it', () => {
    const cases: [unknown, BatonErrorCode, number][] = [
      [new StoreUnavailableError('redis', 'connection refused'), 'store-unavailable', 503],
      [new StoreConflictError('redis', 'too many retries'), 'store-conflict', 503],
      [new StoreClosedError('sqlite'), 'store-closed', 503],
      [new BatonError('store-schema-mismatch', 'newer schema'), 'store-schema-mismatch', 503],
      [new StateTokenError('expired', 'the token expired'), 'state-token', 401],
      [new InvalidArgumentError('sessionId', 'empty'), 'invalid-argument', 400],
      [new HttpError('stale-state-token', 'older token'), 'stale-state-token', 409],
      [new HttpError('server-busy', 'busy'), 'server-busy', 503],
      [new SessionRefusedError('session-busy', 's', 'busy'), 'session-busy', 429],
    ];
    for (const [error, code, status] of cases) {
      const response = errorResponse(error);
      expect(response.status, code).toBe(status);
      expect(response.status).toBe(HTTP_STATUS_BY_CODE[code]);
      expect(response.body.error.code).toBe(code);
      // A store that cannot be reached is the server's to log; the others are the client's or pass.
      expect(response.serverFault).toBe(code === 'store-unavailable');
      if (status === 503 || status === 429) expect(Number(response.headers['retry-after'])).toBeGreaterThan(0);
    }
  });

  it('answers a fault of the server with a 500 that tells the client nothing', () => {
    const faults = [
      new TemplateConfigError([]),
      new MissingApiKeyError('openai', 'OPENAI_API_KEY'),
      new ToolRejectedError('search', { code: 'no-such-tool', message: 'x' }, []),
      new BatonError('store-failed', 'secret detail'),
      new TypeError('a bug'),
      'a thrown string',
    ];
    for (const fault of faults) {
      const response = errorResponse(fault);
      expect(response.status).toBe(500);
      expect(response.serverFault).toBe(true);
      expect(response.body).toEqual({
        error: { code: 'internal-error', message: 'The server failed; the error is in its log.' },
      });
    }
  });

  it('keeps request paths, and only those: an argument path of the library would mislead', () => {
    expect(errorResponse(new HttpError('invalid-body', 'x', { path: 'body.messages' })).body.error.path).toBe(
      'body.messages',
    );
    expect(errorResponse(new InvalidArgumentError('sessionId', 'empty')).body.error.path).toBeUndefined();
  });

  it('points an AI SDK validation error at the part it names', () => {
    const error = new TypeValidationError({
      value: {},
      cause: 'bad input',
      context: { field: 'messages[2].parts[0].input' },
    });
    expect(errorResponse(error)).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid-messages', path: 'body.messages[2].parts[0].input' } },
    });
  });
});

describe('the same condition on different stores', () => {
  const chat = (app: BatonApp) =>
    app.request('/api/chat/cognitive-reasoner', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }] }),
    });

  async function answers(app: BatonApp) {
    const response = await chat(app);
    const health = await app.request('/healthz');
    return {
      chat: response.status,
      retryAfter: response.headers.get('retry-after'),
      code: ((await response.json()) as ApiErrorBody).error.code,
      health: health.status,
    };
  }

  it('answers a database of a newer Baton with 503 on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-http-errors-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'state.db');
    await sqliteStore({ path }).close();
    const db = new DatabaseSync(path);
    db.prepare('UPDATE baton_meta SET schema_version = ? WHERE name = ?').run(
      SQLITE_SCHEMA_VERSION + 1,
      DEFAULT_SQLITE_TABLE,
    );
    db.close();
    const app = createApp({ agents: [reasoner], model: 'offline', webRoot: false, store: `sqlite:${path}` });
    cleanups.push(() => app.close().catch(() => undefined));
    const seen = await answers(app);
    expect(seen).toMatchObject({ chat: 503, health: 503 });
    expect(Number(seen.retryAfter)).toBeGreaterThan(0);
  });

  it.skipIf(skipPostgres)('answers a table of a newer Baton with 503 on PostgreSQL too', async () => {
    const table = `baton_test_h${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
    cleanups.push(async () => {
      await admin.query(`DROP TABLE IF EXISTS "${table}_log", "${table}", "${table}_migrations"`);
      await admin.end();
    });
    const first = postgresStore({ connectionString: POSTGRES_URL, table });
    await first.get('x');
    await first.close();
    await admin.query(`INSERT INTO "${table}_migrations" (version, description) VALUES ($1, 'from the future')`, [
      POSTGRES_SCHEMA_VERSION + 1,
    ]);
    const manager = createOrchestrationManager({ store: postgresStore({ connectionString: POSTGRES_URL, table }) });
    cleanups.push(() => manager.close().catch(() => undefined));
    const app = createApp({ agents: [reasoner], model: 'offline', webRoot: false, manager });
    const seen = await answers(app);
    expect(seen).toMatchObject({ chat: 503, code: 'store-schema-mismatch', health: 503 });
    expect(Number(seen.retryAfter)).toBeGreaterThan(0);
  });

  it('answers a closed store with 503, not as a bad request', async () => {
    const manager = createOrchestrationManager({ store: 'memory:' });
    const app = createApp({ agents: [reasoner], model: 'offline', webRoot: false, manager });
    await manager.close();
    const seen = await answers(app);
    expect(seen.chat).toBe(503);
    expect(seen.health).toBe(503);
  });
});
