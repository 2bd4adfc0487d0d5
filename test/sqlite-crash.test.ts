/**
 * Kills a process writing to the SQLite store with SIGKILL, mid-stream, 20 times over one
 * database file. Each time the database must open cleanly, hold every write the child
 * acknowledged and no write out of order: an acknowledged write is never lost and the file is
 * never corrupted.
 * Also runs several writer processes at once on one file: no update may be lost.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_SQLITE_TABLE, sqliteStore } from '../src/stores/sqlite.js';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const directory = mkdtempSync(join(tmpdir(), 'baton-sqlite-crash-'));
const RUNS = 20;

afterAll(() => rmSync(directory, { recursive: true, force: true }));

interface Outcome {
  /** Numbers the child printed after their write resolved, in order. */
  acknowledged: number[];
  /** Milliseconds between the first acknowledged write and SIGKILL. */
  delay: number;
}

/** Runs the writer until a random moment after its first acknowledged write, then SIGKILLs it. */
function runWriter(path: string, run: number): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/sqlite-writer.ts', path, String(run)], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const delay = Math.floor(Math.random() * 150);
    const acknowledged: number[] = [];
    let pending = '';
    let stderr = '';
    let killTimer: NodeJS.Timeout | undefined;
    const giveUp = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk;
      const lines = pending.split('\n');
      // A trailing fragment without its newline was not fully printed: it is not counted.
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const match = /^(\d+) (\d+)$/.exec(line);
        if (match === null || Number(match[1]) !== run) {
          reject(new Error(`run ${run}: unexpected output line ${JSON.stringify(line)}`));
          return;
        }
        acknowledged.push(Number(match[2]));
      }
      if (killTimer === undefined && acknowledged.length > 0) {
        killTimer = setTimeout(() => child.kill('SIGKILL'), delay);
      }
    });
    child.on('error', reject);
    // 'close' waits for the pipes to drain, so every line printed before the kill is read.
    child.on('close', (code, signal) => {
      clearTimeout(giveUp);
      if (killTimer === undefined || signal !== 'SIGKILL') {
        reject(
          new Error(`run ${run}: writer ended with code ${code}, signal ${signal}, before being killed:\n${stderr}`),
        );
      } else {
        resolve({ acknowledged, delay });
      }
    });
  });
}

/** Runs the writer for `limit` writes and resolves to its exit code and its output. */
function runWriterToEnd(path: string, run: number, limit: number) {
  return new Promise<{ code: number | null; lines: number; stderr: string }>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/sqlite-writer.ts', path, String(run), String(limit)],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, lines: stdout.split('\n').length - 1, stderr }));
  });
}

describe('SQLite store under SIGKILL', () => {
  it(`keeps every acknowledged write and stays intact across ${RUNS} kills`, { timeout: 90_000 }, async () => {
    const path = join(directory, 'crash.db');
    let tally = 0;
    const summary: string[] = [];
    for (let run = 0; run < RUNS; run++) {
      const { acknowledged, delay } = await runWriter(path, run);
      const count = acknowledged.length;
      expect(acknowledged, `run ${run}: acknowledgements in order`).toEqual(Array.from({ length: count }, (_, n) => n));

      // The file as the crash left it (with its WAL): SQLite must find nothing wrong.
      const db = new DatabaseSync(path);
      expect(db.prepare('PRAGMA integrity_check').all(), `run ${run}: integrity`).toEqual([{ integrity_check: 'ok' }]);
      const rows = db
        .prepare(`SELECT session_id FROM ${DEFAULT_SQLITE_TABLE} WHERE session_id LIKE ?`)
        .all(`run${run}-%`)
        .map((row) => String(row.session_id));
      db.close();
      // What the store promises: every acknowledged write is there, and the writes that are
      // there are a prefix of those attempted (one at a time, in order). More rows than
      // acknowledgements is no fault: the child may commit many writes whose lines were still
      // queued in its own memory when it died (a busy parent reads the pipe slowly, the socket
      // fills, and Node queues the rest), so the count of rows is bounded below, not above.
      const written = rows.length;
      expect(written, `run ${run}: rows written for ${count} acknowledged`).toBeGreaterThanOrEqual(count);
      expect(new Set(rows), `run ${run}: rows are a prefix`).toEqual(
        new Set(Array.from({ length: written }, (_, n) => `run${run}-${n}`)),
      );

      const store = sqliteStore({ path });
      try {
        for (let n = 0; n < written; n++) {
          const state = await store.get(`run${run}-${n}`);
          expect(state?.sequenceIndex, `run ${run}: write ${n}`).toBe(n);
        }
        // Each write commits its row, then counts itself in the shared read-modify-write row:
        // the tally grew by one per row, less the last when the kill fell between the two. A
        // lost or doubled update would show here.
        const counted = (await store.get('tally'))?.sequenceIndex ?? 0;
        expect([tally + written - 1, tally + written], `run ${run}: tally after ${written} rows`).toContain(counted);
        tally = counted;
      } finally {
        await store.close();
      }
      summary.push(`${count}@${delay}ms`);
    }
    console.info(`sqlite crash test: acknowledged writes per run (kill delay): ${summary.join(', ')}`);
  });

  it('loses no update when several processes update one session at once', { timeout: 60_000 }, async () => {
    const path = join(directory, 'contended.db');
    const writers = 3;
    const limit = 1_000;
    const results = await Promise.all(Array.from({ length: writers }, (_, run) => runWriterToEnd(path, run, limit)));
    for (const result of results) {
      expect(result, result.stderr).toMatchObject({ code: 0, lines: limit });
    }
    const store = sqliteStore({ path });
    try {
      // Each writer read-modify-wrote 'tally' `limit` times while the others did the same.
      expect((await store.get('tally'))?.sequenceIndex).toBe(writers * limit);
      expect((await store.get('tally'))?.version).toBe(writers * limit);
      for (let run = 0; run < writers; run++) expect(await store.get(`run${run}-${limit - 1}`)).toBeDefined();
    } finally {
      await store.close();
    }
  });
});
