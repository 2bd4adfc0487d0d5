/**
 * Facts and labels (SPEC section 11) at the MCP gateway, in front of the reference filesystem
 * server with the disk as witness: the gateway reads a tool's result as its structured content,
 * so a template can say "edit only a file read before" (a fact of read paths) and "write nothing
 * once a confidential file was read" (a label). On every store.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { inProcessGateway, textOf, workDir } from './helpers/mcp-gateway.js';
import { describeEachStore } from './helpers/store-kinds.js';

const TEMPLATE = {
  id: 'careful-files',
  tools: ['read_text_file', 'write_file', 'list_directory'],
  orchestration: {
    steps: [],
    facts: [{ name: 'read_paths', tools: ['read_text_file'], value: 'args.path', keep: 'union', max: 100 }],
    labels: [
      {
        name: 'confidential',
        tools: ['read_text_file'],
        when: "result.content.contains('CONFIDENTIAL')",
      },
    ],
    rules: [
      {
        tools: ['write_file'],
        when: 'has(state.facts.read_paths) && args.path in state.facts.read_paths',
        effect: 'allow',
        reason: 'Edit only a file you read first',
      },
      {
        tools: ['write_file'],
        when: "'confidential' in state.labels",
        effect: 'deny',
        reason: 'Nothing is written once something confidential was read',
      },
    ],
  },
};

describeEachStore('facts and labels at the MCP gateway', (open) => {
  it('edits only a file read first, and writes nothing once a confidential file was read', async () => {
    const dir = workDir();
    const notes = join(dir, 'notes.txt');
    const secret = join(dir, 'secret.txt');
    writeFileSync(notes, 'draft');
    writeFileSync(secret, 'CONFIDENTIAL: the plan');
    const { client, close } = await inProcessGateway(
      TEMPLATE,
      createOrchestrationManager({ store: open() }),
      dir,
      `facts-${randomUUID()}`,
    );
    try {
      // Not read yet: refused, and the file is as it was.
      const early = await client.callTool({ name: 'write_file', arguments: { path: notes, content: 'v1' } });
      expect(early.isError).toBe(true);
      expect(textOf(early)).toMatch(/read_paths|Edit only a file you read first/);
      expect(readFileSync(notes, 'utf8')).toBe('draft');
      // Read, then written.
      expect((await client.callTool({ name: 'read_text_file', arguments: { path: notes } })).isError).not.toBe(true);
      const edit = await client.callTool({ name: 'write_file', arguments: { path: notes, content: 'v2' } });
      expect(edit.isError, textOf(edit)).not.toBe(true);
      expect(readFileSync(notes, 'utf8')).toBe('v2');
      // A file never read stays unwritten.
      const other = join(dir, 'other.txt');
      expect((await client.callTool({ name: 'write_file', arguments: { path: other, content: 'x' } })).isError).toBe(
        true,
      );
      expect(existsSync(other)).toBe(false);
      // Reading the confidential file raises the label: from then on nothing is written.
      expect((await client.callTool({ name: 'read_text_file', arguments: { path: secret } })).isError).not.toBe(true);
      const after = await client.callTool({ name: 'write_file', arguments: { path: notes, content: 'v3' } });
      expect(after.isError).toBe(true);
      expect(textOf(after)).toMatch(/confidential/);
      expect(readFileSync(notes, 'utf8')).toBe('v2');
    } finally {
      await close();
    }
  }, 60_000);
});
