/**
 * `--policy <file>` of `baton serve` and `baton mcp`: the operator's policy (SPEC section 11) read
 * from a JSON file and checked at startup, so a bad policy stops the start with every problem
 * and its path, never a request.
 */
import { readFile } from 'node:fs/promises';
import { type CompiledPolicy, parsePolicy } from '../core/policy.js';
import { formatIssues, TemplateConfigError } from '../core/template-issues.js';

/** The policy in `path`, compiled; or what is wrong with it, in one message. */
export async function readPolicyFile(
  path: string,
): Promise<{ ok: true; policy: CompiledPolicy } | { ok: false; message: string }> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    return { ok: false, message: `--policy: cannot read ${path}: ${(error as Error).message}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, message: `--policy: ${path} is not JSON: ${(error as Error).message}` };
  }
  try {
    return { ok: true, policy: parsePolicy(json, path) };
  } catch (error) {
    if (!TemplateConfigError.isInstance(error)) throw error;
    return { ok: false, message: `--policy: ${formatIssues(error.issues, path, 'policy')}` };
  }
}
