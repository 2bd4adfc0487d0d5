#!/usr/bin/env node
/**
 * The `baton` bin. It checks the Node.js version before it loads the command, whose imports
 * (node:sqlite among them) would otherwise fail on an old Node.js with an error that does not
 * say why; so this file imports only the version check, and the command dynamically.
 */
import { unsupportedNodeMessage } from './node-version.js';

const problem = unsupportedNodeMessage(process.versions.node);
if (problem) {
  process.stderr.write(`baton: ${problem}\n`);
  process.exitCode = 1;
} else {
  await import('./main.js');
}
