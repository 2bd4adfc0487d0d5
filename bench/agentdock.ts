/**
 * Loads AgentDock's own `OrchestrationManager` (agentdock-core/src/orchestration) at run time, so
 * the benchmark can measure it beside Baton instead of quoting a figure. AgentDock's code is never
 * part of this repository: it is read from a checkout or a git directory of
 * github.com/AgentDock/AgentDock, bundled with esbuild into `bench/.cache/` (ignored by git) and
 * imported from there. Its two optional storage clients (`@upstash/redis`, `@vercel/kv`) are
 * replaced by empty modules: the benchmark uses its default memory storage, as the harness does.
 *
 * Where it looks, first found wins: `$AGENTDOCK_REPO` (a checkout with `agentdock-core/src`, or a
 * git directory), then the snapshot the library tools fetch to
 * `/work/.mirror/AgentDock+AgentDock/repo`. When none exists, {@link loadAgentDock} says why and
 * the benchmark prints no AgentDock ratio.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

/** AgentDock's `OrchestrationManager`, as the harness calls it. */
export interface AgentDockManager {
  getAllowedTools(config: object, messages: object[], sessionId: string, allToolIds: string[]): Promise<string[]>;
  processToolUsage(config: object, messages: object[], sessionId: string, toolName: string): Promise<void>;
}

/** What {@link loadAgentDock} found. */
export type AgentDockLoad =
  | { readonly ok: true; readonly create: () => AgentDockManager; readonly source: string; readonly commit: string }
  | { readonly ok: false; readonly reason: string };

const DEFAULT_MIRROR = '/work/.mirror/AgentDock+AgentDock/repo';
const CACHE = resolve(import.meta.dirname, '.cache');
const ENTRY = 'agentdock-core/src/orchestration/index.ts';
/** Set once AgentDock's bundle has loaded: its package stand-ins throw when called after that. */
const LOADED = '__batonAgentDockLoaded';

function git(gitDir: string, args: readonly string[]): Buffer {
  return execFileSync('git', [`--git-dir=${gitDir}`, ...args], { maxBuffer: 256 * 1024 * 1024 });
}

/** A directory holding `agentdock-core/src`, extracting it from a git directory when needed. */
function sourceTree(location: string): { root: string; commit: string } {
  if (existsSync(join(location, ENTRY))) {
    let commit = 'working tree';
    try {
      commit = execFileSync('git', ['-C', location, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    } catch {
      // Not a git checkout: the files are what they are.
    }
    return { root: location, commit };
  }
  const commit = git(location, ['rev-parse', 'HEAD']).toString().trim();
  const root = join(CACHE, `agentdock-${commit.slice(0, 12)}`);
  if (!existsSync(join(root, ENTRY))) {
    rmSync(root, { recursive: true, force: true });
    mkdirSync(root, { recursive: true });
    const tar = git(location, ['archive', '--format=tar', commit, 'agentdock-core/src']);
    execFileSync('tar', ['-x', '-C', root], { input: tar });
  }
  return { root, commit };
}

/** Bundles and imports AgentDock's orchestration module, or says why it cannot. */
export async function loadAgentDock(): Promise<AgentDockLoad> {
  const candidates = [process.env.AGENTDOCK_REPO, DEFAULT_MIRROR].filter(
    (p): p is string => p !== undefined && p !== '',
  );
  const location = candidates.find((p) => existsSync(p));
  if (location === undefined) {
    return {
      ok: false,
      reason:
        'AgentDock not found: set AGENTDOCK_REPO to a checkout (or git directory) of github.com/AgentDock/AgentDock',
    };
  }
  try {
    const { root, commit } = sourceTree(location);
    const outfile = join(CACHE, `agentdock-orchestration-${commit.slice(0, 12).replace(/\W/g, '-')}.mjs`);
    await build({
      // AgentDock's orchestration module, plus its logger, so the harness can set the level.
      stdin: {
        contents: `export * from './${ENTRY}'; export { logger, LogLevel } from './agentdock-core/src/logging/index.ts';`,
        resolveDir: root,
        loader: 'ts',
      },
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node24',
      logLevel: 'silent',
      plugins: [
        {
          // AgentDock's orchestration module reaches, through shared files, its LLM providers and
          // storage clients (packages this repository does not install); the orchestration path
          // the harness runs (memory storage, no model) never calls them, so every package import
          // becomes an empty stand-in. Node's built-ins stay real. A stand-in answers what
          // AgentDock's modules do with it while they load; called once they have loaded (the
          // measured path reaching a package after all), it throws, naming the package, so a
          // figure never silently includes a no-op.
          name: 'absent-packages',
          setup(b) {
            b.onResolve({ filter: /^[^./]/ }, (args) =>
              args.path.startsWith('node:') || isBuiltin(args.path)
                ? { path: args.path, external: true }
                : { path: args.path, namespace: 'absent' },
            );
            b.onLoad({ filter: /.*/, namespace: 'absent' }, (args) => ({
              contents: `const used = () => { if (globalThis[${JSON.stringify(LOADED)}]) throw new Error(${JSON.stringify(`AgentDock's harness path used the package "${args.path}", which the benchmark replaces with a stand-in: its figures would not be AgentDock's`)}); return stub; };
const stub = new Proxy(function () {}, { get: (_t, k) => (k === "__esModule" ? false : stub), apply: used, construct: used });
module.exports = stub;`,
              loader: 'js',
            }));
          },
        },
      ],
    });
    (globalThis as Record<string, unknown>)[LOADED] = false;
    const mod = (await import(pathToFileURL(outfile).href)) as {
      createOrchestrationManager?: () => AgentDockManager;
      logger?: { setLogLevel(level: unknown): void };
      LogLevel?: { ERROR: unknown };
    };
    const create = mod.createOrchestrationManager;
    if (typeof create !== 'function') return { ok: false, reason: `${ENTRY} exports no createOrchestrationManager` };
    // AgentDock logs every decision at DEBUG to the console by default; a deployment (and the
    // harness) keeps errors only, so its logger's level checks stay in the measured path but
    // nothing is printed.
    mod.logger?.setLogLevel(mod.LogLevel?.ERROR);
    // From now on a stand-in that is called throws (see the plugin above).
    (globalThis as Record<string, unknown>)[LOADED] = true;
    return { ok: true, create: () => create(), source: location, commit };
  } catch (error) {
    return { ok: false, reason: `AgentDock could not be loaded from ${location}: ${(error as Error).message}` };
  }
}
