/**
 * The Node.js versions Baton runs on. Checked by the bin before it loads anything else: on an
 * older Node.js the rest of the command fails on its first `node:sqlite` import with
 * `ERR_UNKNOWN_BUILTIN_MODULE`, which does not say what to do. This module imports nothing, so it
 * loads on any Node.js that runs ES modules.
 */

/** The oldest Node.js Baton supports: the first 22.x with `node:sqlite` unflagged (package.json `engines`). */
export const MINIMUM_NODE_VERSION = '22.13.0';

/** Undefined when Node.js `version` (e.g. `process.versions.node`) is supported, else the message to print. */
export function unsupportedNodeMessage(version: string): string | undefined {
  if (compareVersions(version, MINIMUM_NODE_VERSION) >= 0) return undefined;
  return (
    `Baton needs Node.js ${MINIMUM_NODE_VERSION} or newer, and this is Node.js ${version}. ` +
    'Install a current LTS release (https://nodejs.org, or `nvm install --lts`) and run the command again.'
  );
}

/** Compares two `major.minor.patch` versions (any pre-release suffix is ignored). */
function compareVersions(a: string, b: string): number {
  const parse = (version: string) => version.replace(/^v/, '').split(/[.-]/, 3).map(Number);
  const left = parse(a);
  const right = parse(b);
  for (let i = 0; i < 3; i++) {
    const difference = (left[i] || 0) - (right[i] || 0);
    if (difference !== 0) return difference;
  }
  return 0;
}
