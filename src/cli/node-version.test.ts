import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MINIMUM_NODE_VERSION, unsupportedNodeMessage } from './node-version.js';

describe('unsupportedNodeMessage', () => {
  it('accepts the minimum and anything newer', () => {
    for (const version of ['22.13.0', '22.13.1', '22.20.0', '23.11.0', '24.0.0', '24.21.0', '25.1.0-nightly']) {
      expect(unsupportedNodeMessage(version), version).toBeUndefined();
    }
  });

  it('refuses older versions with one message naming both versions and the fix', () => {
    for (const version of ['22.12.0', '22.5.1', '20.20.2', '18.19.0', 'v21.7.3']) {
      const message = unsupportedNodeMessage(version);
      expect(message, version).toContain(`Node.js ${MINIMUM_NODE_VERSION} or newer`);
      expect(message, version).toContain(`this is Node.js ${version}`);
      expect(message, version).toContain('nvm install --lts');
    }
  });

  it('agrees with the engines field of package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      engines: { node: string };
    };
    expect(`${pkg.engines.node.replace(/^>=/, '')}.0`.split('.').slice(0, 3).join('.')).toBe(MINIMUM_NODE_VERSION);
  });
});
