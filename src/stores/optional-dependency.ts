/**
 * Loading the packages only some users need: ioredis, pg, the AI SDK provider packages, and
 * Node's own `node:sqlite`. They are optional peer dependencies, so an app installs just the
 * ones it uses; Baton loads one when the store or model that needs it is created, and a missing
 * one fails right there with the command that fixes it, not with `ERR_MODULE_NOT_FOUND` at the
 * first request.
 *
 * The load is synchronous (`require`) because store and model factories are synchronous.
 * CommonJS packages (ioredis, pg) load as they always do; the ESM-only AI SDK packages load
 * through `require(esm)`, which Node >= 22.12 supports and which returns the same module
 * instance an `import` would, so there is never a second copy. It lives here rather than in
 * core/ because core may not import `node:*`; the ai-sdk layer may import stores/.
 *
 * Why `process.getBuiltinModule` rather than `import { createRequire } from 'node:module'`:
 * bundlers (Next.js's Turbopack, webpack) rewrite `createRequire(import.meta.url)` and the
 * calls of what it returns into their own module system, where `node:sqlite` or a package they
 * did not bundle cannot be found ("Cannot find module 'node:sqlite': Unsupported external type
 * Url"). `process.getBuiltinModule` is a plain function call to them, so Node's own loader
 * answers, in a bundle as outside one.
 */
import { MissingDependencyError, UnsupportedRuntimeError } from '../core/errors.js';

/** The lowest Node.js with everything Baton needs (`node:sqlite` unflagged, `require(esm)`). */
const MINIMUM_NODE = '22.13';

let nodeRequire: NodeJS.Require | undefined;

/** Node's own `require`, resolving from this package (see the module comment for why this way). */
function requireFromHere(): NodeJS.Require {
  if (nodeRequire) return nodeRequire;
  if (typeof process.getBuiltinModule !== 'function') {
    throw new UnsupportedRuntimeError(
      'node:module',
      `Baton needs Node.js ${MINIMUM_NODE} or newer; this is Node.js ${process.versions.node}.`,
    );
  }
  nodeRequire = process.getBuiltinModule('node:module').createRequire(import.meta.url);
  return nodeRequire;
}

/** Codes of a Node.js too old to `require()` an ES module. */
const NO_REQUIRE_ESM = new Set(['ERR_REQUIRE_ESM', 'ERR_REQUIRE_ASYNC_MODULE']);

/**
 * Loads the optional package `packageName`, needed by `feature` (e.g. "The Redis store").
 * Throws {@link MissingDependencyError} when it is not installed (or cannot be loaded), and
 * {@link UnsupportedRuntimeError} when this Node.js cannot load an ES module synchronously.
 */
export function loadOptionalDependency<Module>(packageName: string, feature: string): Module {
  try {
    // Resolve first, so a package that is present but breaks while loading (a missing
    // transitive dependency, say) is not reported as absent.
    requireFromHere().resolve(packageName);
  } catch (error) {
    if (errorCode(error) === 'MODULE_NOT_FOUND')
      throw new MissingDependencyError(packageName, feature, { cause: error });
    throw new MissingDependencyError(packageName, feature, { cause: error, installed: true });
  }
  try {
    return requireFromHere()(packageName) as Module;
  } catch (error) {
    if (NO_REQUIRE_ESM.has(errorCode(error))) {
      throw new UnsupportedRuntimeError(
        packageName,
        `${feature} needs "${packageName}", an ES module that Node.js ${process.versions.node} cannot load synchronously: use Node.js ${MINIMUM_NODE} or newer.`,
        { cause: error },
      );
    }
    throw new MissingDependencyError(packageName, feature, { cause: error, installed: true });
  }
}

/**
 * Node's own `node:sqlite` module, or {@link UnsupportedRuntimeError} on a Node.js that lacks it
 * (Node < 22.5 has none; 22.5 to 22.12 hide it behind `--experimental-sqlite`: the fix is the same).
 */
export function loadNodeSqlite(): typeof import('node:sqlite') {
  const sqlite = typeof process.getBuiltinModule === 'function' ? process.getBuiltinModule('node:sqlite') : undefined;
  if (sqlite === undefined) {
    throw new UnsupportedRuntimeError(
      'node:sqlite',
      `The SQLite store needs node:sqlite, which Node.js ${process.versions.node} does not provide: use Node.js ${MINIMUM_NODE} or newer, or another store (memory:, redis://, postgres://).`,
    );
  }
  return sqlite;
}

function errorCode(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
}
