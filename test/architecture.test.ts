/**
 * The layering of ARCHITECTURE.md, checked on the source: dependencies point one way
 * (cli -> server -> agents -> ai-sdk -> orchestration -> core, stores -> core, cli and server ->
 * telemetry -> orchestration), the core stays pure, and the browser code takes only types from the server.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('..', import.meta.url).pathname;

/** Which folders of src/ each folder may import from (itself included). */
const ALLOWED: Record<string, readonly string[]> = {
  core: ['core'],
  stores: ['core', 'stores'],
  templates: ['core', 'templates'],
  orchestration: ['core', 'stores', 'orchestration'],
  'ai-sdk': ['core', 'stores', 'orchestration', 'templates', 'ai-sdk'],
  agents: ['core', 'stores', 'orchestration', 'templates', 'ai-sdk', 'agents'],
  // createApp({ telemetry }) records its decisions and names each request's session on its spans.
  server: ['core', 'stores', 'orchestration', 'templates', 'ai-sdk', 'agents', 'telemetry', 'server'],
  cli: ['core', 'stores', 'orchestration', 'templates', 'ai-sdk', 'agents', 'server', 'telemetry', 'mcp', 'cli'],
  // The gateway is a shell like the server's routes; over HTTP it mounts on createApp().
  mcp: ['core', 'stores', 'orchestration', 'templates', 'ai-sdk', 'server', 'mcp'],
  testing: ['core', 'stores', 'orchestration', 'ai-sdk', 'testing'],
  // A listener on the manager's events and the request's spans; the server and the CLI wire it in.
  telemetry: ['core', 'stores', 'orchestration', 'telemetry'],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

/** Every module specifier of a file's import and export-from statements, with `type`-only ones marked. */
function importsOf(file: string): { specifier: string; typeOnly: boolean }[] {
  const text = readFileSync(file, 'utf8');
  const found: { specifier: string; typeOnly: boolean }[] = [];
  for (const match of text.matchAll(/^(?:import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms)) {
    found.push({ specifier: match[2]!, typeOnly: match[1] !== undefined });
  }
  for (const match of text.matchAll(/import\(\s*'([^']+)'\s*\)/g))
    found.push({ specifier: match[1]!, typeOnly: false });
  return found;
}

describe('architecture', () => {
  const files = sourceFiles(join(ROOT, 'src')).filter((file) => relative(join(ROOT, 'src'), file).includes('/'));

  it('finds the source it checks', () => {
    expect(files.length).toBeGreaterThan(40);
    expect(new Set(files.map((file) => relative(join(ROOT, 'src'), file).split('/')[0]))).toEqual(
      new Set(Object.keys(ALLOWED)),
    );
  });

  it('keeps every dependency pointing one way', () => {
    const violations: string[] = [];
    for (const file of files) {
      const layer = relative(join(ROOT, 'src'), file).split('/')[0]!;
      for (const { specifier } of importsOf(file)) {
        if (!specifier.startsWith('.')) continue;
        const target = relative(join(ROOT, 'src'), join(file, '..', specifier)).split('/')[0]!;
        if (!ALLOWED[layer]!.includes(target)) violations.push(`${relative(ROOT, file)} imports ${specifier}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('keeps the core pure: no node:* modules, no clock', () => {
    const impure: string[] = [];
    for (const file of files.filter((f) => relative(join(ROOT, 'src'), f).startsWith('core/'))) {
      const text = readFileSync(file, 'utf8');
      for (const { specifier } of importsOf(file)) {
        if (specifier.startsWith('node:')) impure.push(`${relative(ROOT, file)} imports ${specifier}`);
      }
      if (/\bDate\.now\(|\bperformance\.now\(/.test(text)) impure.push(`${relative(ROOT, file)} reads the clock`);
    }
    expect(impure).toEqual([]);
  });

  it('lets the inspector take only types from the server code', () => {
    const leaks: string[] = [];
    for (const file of sourceFiles(join(ROOT, 'web', 'src'))) {
      for (const { specifier, typeOnly } of importsOf(file)) {
        if (specifier.includes('/src/') && !typeOnly) leaks.push(`${relative(ROOT, file)} imports ${specifier}`);
      }
    }
    expect(leaks).toEqual([]);
  });
});
