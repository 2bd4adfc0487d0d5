/**
 * Baton and OPA (`@ai-sdk/policy-opa`) guarding one agent, both restrictions winning: the
 * example `examples/opa-composition.ts` as it stands, with its real `opaPolicy` and
 * `httpPolicyClient` (the `@open-policy-agent/opa` REST client).
 *
 * OPA itself is stood in for by a small server answering OPA's data API (`POST /v1/data/<path>`)
 * with what `examples/opa/agent.rego` decides. Why not the real thing: the package's in-process
 * mode evaluates a WebAssembly bundle that only the `opa` command-line tool can compile from
 * Rego, and neither `opa` nor a compiled bundle is installable from npm; so both of its modes
 * need an OPA this test cannot start. The stub checks the request as OPA would read it (the
 * path, `input.tool.name`, `input.args`), so the package's real client and decision mapping run.
 *
 * The README's sample of this wiring (README.md, "Rules on calls") is checked against the example.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { checkedSampleLines } from './helpers/checked-sample.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BLOCKED: readonly string[] = (
  JSON.parse(readFileSync(`${ROOT}examples/opa/data.json`, 'utf8')) as { blocked_payees: string[] }
).blocked_payees;

interface OpaInput {
  tool: { name: string };
  args: { to?: string; amount?: number };
}

/** A stand-in for `opa run --server` with examples/opa/agent.rego; `status` 500 makes it fail. */
async function fakeOpa(status = 200): Promise<{ url: string; asked: OpaInput[]; server: Server }> {
  const asked: OpaInput[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/data/agent/call/decision') {
        response.writeHead(404).end(JSON.stringify({ code: 'undefined_document' }));
        return;
      }
      const { input } = JSON.parse(body) as { input: OpaInput };
      asked.push(input);
      if (status !== 200) {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ code: 'internal_error', message: 'policy bundle not loaded' }));
        return;
      }
      // examples/opa/agent.rego, rule for rule.
      const to = input.args.to;
      const result =
        input.tool.name === 'pay' && to !== undefined && BLOCKED.includes(to)
          ? { decision: 'deny', reason: `payee ${to} is blocked by the security team` }
          : { decision: 'not-applicable' };
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ result }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked, server };
}

let opa: Awaited<ReturnType<typeof fakeOpa>> | undefined;
afterEach(async () => {
  const server = opa?.server;
  opa = undefined;
  if (server === undefined) return;
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Runs the example as its comment says (`npm run example examples/opa-composition.ts`), against the stand-in. */
async function turn(status?: number) {
  opa = await fakeOpa(status);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=baton-source', 'examples/opa-composition.ts'],
    { cwd: ROOT, env: { ...process.env, OPA_URL: opa.url }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const code = await new Promise((resolve) => child.once('exit', resolve));
  expect(code, output).toBe(0);
  const lines = output.trim().split('\n');
  const paid = lines.filter((line) => line.startsWith('PAID '));
  /** Why each refused call was refused, as the model reads it. */
  const refused = new Map<string, string>();
  for (const line of lines) {
    const match = /^refused (\S+): (.*)$/.exec(line);
    if (match) refused.set(match[1]!, match[2]!);
  }
  return { paid, refused, asked: opa.asked, output };
}

describe('Baton and OPA guarding one agent', () => {
  it('runs only the call both allow; each refusal says whose rule refused it', async () => {
    const { paid, refused, asked, output } = await turn();
    // pay-0 (mallory): Baton allows, OPA denies. pay-1 (5000): Baton denies. pay-2 runs; then
    // Baton's limit (one payment per question) is spent, and pay is no longer offered.
    expect(paid).toEqual(['PAID 50 to acme']);
    expect(refused.get('pay-0')).toBe('payee mallory is blocked by the security team');
    expect(refused.get('pay-1')).toContain('Payments over 1000 need finance');
    expect([...refused.keys()].sort()).toEqual(['pay-0', 'pay-1']);
    expect(output).toContain('Paying is not offered now: done.');
    // OPA is asked only about calls Baton allows, with the call's input.
    expect(asked.map((input) => input.args)).toEqual([
      { to: 'mallory', amount: 50 },
      { to: 'acme', amount: 50 },
    ]);
  });

  it('fails closed: while OPA does not answer, nothing Baton allows runs either', async () => {
    const { paid, refused, asked } = await turn(500);
    expect(paid).toEqual([]);
    expect(refused.get('pay-0')).toMatch(/^policy evaluation failed/);
    expect(refused.get('pay-1')).toContain('Payments over 1000 need finance'); // Baton, without asking OPA
    expect(asked.length).toBeGreaterThan(0);
  });

  it("the README's sample is the example's wiring", () => {
    const example = readFileSync(`${ROOT}examples/opa-composition.ts`, 'utf8');
    const code = checkedSampleLines('README.md', 'test/opa-composition.test.ts');
    expect(code.length).toBeGreaterThan(3);
    for (const line of code) expect(example, line).toContain(line);
  });
});
