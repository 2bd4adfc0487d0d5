/**
 * `baton serve` at the node:http layer, against a real child process, with raw sockets where a
 * fetch client would hide what happens on the wire: clients that leave half-way through a body,
 * clients too slow to send their headers, bodies over the limit on keep-alive connections, and a
 * message of a megabyte. The same, with `--workers 2`: there the primary accepts each connection
 * and hands it to a worker, which must treat it exactly as one it had accepted itself.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';

const AGENT = 'cognitive-reasoner';
const START_TIMEOUT_MS = 60_000;

/** The parent's BATON_* settings (an API key, a model) must not change what the server does. */
const env = { ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_'))) };

const scratch = mkdtempSync(join(tmpdir(), 'baton-serve-http-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function start(args: readonly string[], store = 'memory:'): Promise<ServeProcess> {
  return startServeProcess(['examples/agents', '--model', 'offline', '--store', store, '--port', '0', ...args], {
    env: { ...env, FORCE_COLOR: '0' },
    timeoutMs: START_TIMEOUT_MS - 5_000,
  });
}

/** A raw TCP connection to the server, recording what it receives and when it closes. */
interface RawConnection {
  socket: Socket;
  received(): string;
  /** Resolves once the server closed the connection (or it failed). */
  closed: Promise<void>;
}

function open(server: ServeProcess): Promise<RawConnection> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let text = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
    });
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve({ socket, received: () => text, closed }));
    socket.once('error', reject);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `condition` holds, checking every 25 ms, for at most `ms`. */
async function until(condition: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition() && Date.now() < deadline) await sleep(25);
}

/** The JSON log lines the server printed after `from` (an offset into its output), and the other lines. */
function logSince(server: ServeProcess, from: number) {
  const lines = server
    .output()
    .slice(from)
    .split('\n')
    .filter((line) => line.trim() !== '');
  const json: { level: number; status?: number; msg: string }[] = [];
  const other: string[] = [];
  for (const line of lines) {
    try {
      json.push(JSON.parse(line));
    } catch {
      other.push(line);
    }
  }
  return { json, other };
}

function chatBody(text: string): string {
  return JSON.stringify({ messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text }] }] });
}

const processes: [string, readonly string[], () => string][] = [
  ['one process', [], () => 'memory:'],
  ['two workers', ['--workers', '2'], () => `sqlite:${join(scratch, 'workers.db')}`],
];

describe.each(processes)('baton serve at the HTTP layer, %s', (_, processArgs, store) => {
  let server: ServeProcess;
  beforeAll(async () => {
    server = await start(
      [
        ...processArgs,
        '--log-level',
        'info',
        '--body-limit',
        String(2 * 1024 * 1024),
        '--headers-timeout',
        '400',
        '--request-timeout',
        '3000',
      ],
      store(),
    );
    // The banner goes on after the "listening" line; on a busy machine it can still be arriving
    // when a test starts, and would count as unexpected output there.
    await until(() => server.output().includes('Inspector:'), 10_000);
  }, START_TIMEOUT_MS);
  afterAll(() => stopServeProcess(server));

  it('logs no error and answers no 5xx when 30 clients leave half-way through their bodies', async () => {
    const from = server.output().length;
    const body = chatBody('How many electric vehicles will be on the road by 2030?');
    await Promise.all(
      Array.from({ length: 30 }, async () => {
        const connection = await open(server);
        connection.socket.write(
          `POST /api/chat/${AGENT} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${body.length}\r\n\r\n${body.slice(0, body.length / 2)}`,
        );
        await sleep(150);
        connection.socket.destroy();
      }),
    );
    // Every abandoned request is logged once, when the server notices.
    await until(() => logSince(server, from).json.filter((line) => line.msg === 'request').length >= 30, 5_000);
    const { json, other } = logSince(server, from);
    const requests = json.filter((line) => line.msg === 'request');
    expect(requests).toHaveLength(30);
    expect(requests.every((line) => line.status !== undefined && line.status < 500)).toBe(true);
    // pino levels: 50 error, 60 fatal. Nothing else (a stack, a console line) was printed either.
    expect(json.filter((line) => line.level >= 50)).toEqual([]);
    expect(other).toEqual([]);
    // And the server still serves.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('answers 408 and closes the connection of a client that does not finish its headers in time', async () => {
    const connection = await open(server);
    const started = Date.now();
    connection.socket.write(`GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: `);
    // --headers-timeout 400: Node checks it at least every 100 ms (a quarter of it).
    await Promise.race([connection.closed, sleep(5_000)]);
    const elapsed = Date.now() - started;
    expect(connection.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(connection.socket.destroyed || connection.socket.readableEnded).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(350);
    expect(elapsed).toBeLessThan(2_500);
  });

  it('answers 413 with Connection: close to a keep-alive client, closes that connection, and serves the next one', async () => {
    const connection = await open(server);
    const size = 8 * 1024 * 1024;
    // The client announces 8 MB on a keep-alive connection and starts sending it.
    connection.socket.write(
      `POST /api/chat/${AGENT} HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${size}\r\n\r\n${'x'.repeat(64 * 1024)}`,
    );
    await Promise.race([connection.closed, sleep(5_000)]);
    const response = connection.received();
    expect(response).toMatch(/^HTTP\/1\.1 413 /);
    expect(response).toMatch(/\r\nConnection: close\r\n/i);
    expect(response).not.toMatch(/keep-alive/i);
    expect(response).toContain('"code":"body-too-large"');
    // The server closed the connection after its answer, as it said it would.
    expect(connection.socket.readableEnded || connection.socket.destroyed).toBe(true);

    // A client that sends a whole oversized body still reads the 413, and what follows works.
    const refused = await fetch(`${server.url}/api/chat/${AGENT}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: 'x'.repeat(size),
    });
    expect(refused.status).toBe(413);
    expect(refused.headers.get('connection')).toBe('close');
    await refused.text();
    for (let i = 0; i < 20; i++) expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('keeps a connection alive after an error answered once the whole body arrived', async () => {
    const connection = await open(server);
    const request = (path: string, body: string) =>
      `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    // Two requests on one connection: a 404 for an unknown agent, then a health check.
    connection.socket.write(request('/api/chat/nobody', '{}'));
    await until(() => connection.received().includes('"code":"unknown-agent"'), 5_000);
    connection.socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await until(() => connection.received().includes('"ok":true'), 5_000);
    expect(connection.received()).toMatch(/^HTTP\/1\.1 404 [\s\S]*Connection: keep-alive[\s\S]*HTTP\/1\.1 200 /);
    connection.socket.destroy();
  });

  it('refuses a 1 MB message at once with 413 message-too-large and its path, and stays responsive', async () => {
    const text = 'will '.repeat(200_000);
    const started = performance.now();
    const response = await fetch(`${server.url}/api/chat/${AGENT}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        messages: [
          { id: 'm1', role: 'user', parts: [{ type: 'text', text: 'Hello' }] },
          {
            id: 'm2',
            role: 'user',
            parts: [
              { type: 'text', text: 'A long one:' },
              { type: 'text', text },
            ],
          },
        ],
      }),
    });
    const elapsed = performance.now() - started;
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: unknown }).error).toEqual({
      code: 'message-too-large',
      message: expect.stringMatching(/Message 1 has more than 32000 characters/),
      path: 'body.messages[1].parts[1].text',
    });
    expect(elapsed).toBeLessThan(1_000);
  });
});

describe('baton serve with --max-message-chars raised', () => {
  let server: ServeProcess;
  beforeAll(async () => {
    server = await start([
      '--log-level',
      'silent',
      '--body-limit',
      String(4 * 1024 * 1024),
      '--max-message-chars',
      '2000000',
    ]);
  }, START_TIMEOUT_MS);
  afterAll(() => stopServeProcess(server));

  it('answers a 1 MB message with a whole turn, a bounded response, and no stall', async () => {
    // A warm-up turn: module loading and JIT are not what is measured.
    await (
      await fetch(`${server.url}/api/chat/${AGENT}`, { method: 'POST', body: chatBody('What is CRISPR?') })
    ).text();
    // Before, "will" a thousand times over made the offline model's plan regex backtrack for
    // seconds and its answer quote the whole message in every tool input (27 MB for 900 KB).
    const text = `How many will there be by 2030? ${'will '.repeat(200_000)}`;
    const started = performance.now();
    const response = await fetch(`${server.url}/api/chat/${AGENT}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chatBody(text),
    });
    const body = await response.text();
    const elapsed = performance.now() - started;
    expect(response.status).toBe(200);
    expect(body.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(body).toContain('"activeStep":"ResearchMode"');
    expect(body.length).toBeLessThan(100_000);
    // Every step of the turn reads the megabyte (the template's regex conditions included), so
    // this is seconds of budget on a loaded two-core machine, not the model's own time.
    expect(elapsed).toBeLessThan(5_000);
    // Meanwhile and after, a health check is answered promptly.
    const health = performance.now();
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect(performance.now() - health).toBeLessThan(500);
  });
});
