import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentdockFixtures, agentdockSample, agentdockSampleFiles } from '../../test/helpers/agentdock.js';
import { loadTemplate } from '../templates/load-template.js';
import { templateJsonSchema } from './schema.js';
import { TemplateConfigError, type TemplateIssue } from './template-issues.js';
import { parseTemplate, validateTemplate } from './validate-template.js';

const agentdock = agentdockFixtures();

function issuesOf(json: unknown): TemplateIssue[] {
  const r = validateTemplate(json);
  return r.success ? r.warnings : r.issues;
}
const find = (issues: TemplateIssue[], code: string) => issues.filter((i) => i.code === code);
const base = (orchestration: unknown, extra: Record<string, unknown> = {}) => ({
  id: 'a',
  tools: ['search', 'think', 'reflect'],
  ...extra,
  orchestration,
});

/** Loads an AgentDock template file and checks it kept what Baton does not interpret. */
async function loadsAsItIs(path: string): Promise<void> {
  const raw = JSON.parse(readFileSync(path, 'utf8'));
  const template = await loadTemplate(path);
  expect(template.id).toBe(raw.agentId);
  for (const key of ['chatSettings', 'nodeConfigurations', 'tags']) {
    if (key in raw) expect(template[key]).toEqual(raw[key]);
  }
  expect(template.tools).toEqual((raw.nodes as string[]).filter((n) => !n.startsWith('llm.')));
}

describe.skipIf(agentdock === undefined)('every published AgentDock template', () => {
  const files = agentdock?.files ?? [];

  it('finds them', () => {
    expect(files.length).toBeGreaterThanOrEqual(30);
  });

  it.each(files)('loads %s as it is, keeping unknown top-level keys', loadsAsItIs);
});

describe('AgentDock templates', () => {
  it.each(agentdockSampleFiles)('loads %s as it is, keeping unknown top-level keys', loadsAsItIs);

  it('warns about the steps of dr-house that are shadowed', () => {
    const r = validateTemplate(readFileSync(agentdockSample('dr-house'), 'utf8'));
    expect(r.success).toBe(true);
    if (r.success) {
      expect(r.warnings.map((w) => [w.code, w.path])).toEqual([
        ['shadowed_step', 'orchestration.steps[3]'],
        ['shadowed_step', 'orchestration.steps[4]'],
      ]);
    }
  });
});

describe('errors (SPEC section 1), all reported at once with JSON paths', () => {
  it('reports duplicate step names', () => {
    const [issue] = find(issuesOf(base({ steps: [{ name: 'A' }, { name: 'A', isDefault: true }] })), 'duplicate_step');
    expect(issue).toMatchObject({ severity: 'error', path: 'orchestration.steps[1].name' });
  });

  it('reports two defaults, in both forms', () => {
    expect(
      find(
        issuesOf(
          base({
            steps: [
              { name: 'A', isDefault: true },
              { name: 'B', isDefault: true },
            ],
          }),
        ),
        'multiple_defaults',
      )[0]?.path,
    ).toBe('orchestration.steps[1].isDefault');
    expect(
      find(
        issuesOf(base({ defaultStep: 'A', steps: [{ name: 'A' }, { name: 'B', isDefault: true }] })),
        'multiple_defaults',
      ),
    ).toHaveLength(1);
    expect(
      find(issuesOf(base({ defaultStep: 'A', steps: [{ name: 'A', isDefault: true }] })), 'multiple_defaults'),
    ).toHaveLength(0);
  });

  it('reports a defaultStep that names no step, with a did-you-mean hint', () => {
    const [issue] = find(issuesOf(base({ defaultStep: 'idel', steps: [{ name: 'idle' }] })), 'unknown_default_step');
    expect(issue).toMatchObject({ path: 'orchestration.defaultStep', hint: 'did you mean "idle"?' });
  });

  it('reports a condition missing its value', () => {
    const [issue] = find(
      issuesOf(base({ steps: [{ name: 'A', conditions: [{ type: 'tool_used' }] }] })),
      'missing_value',
    );
    expect(issue?.path).toBe('orchestration.steps[0].conditions[0].value');
  });

  it('reports sequence_match on a step without a sequence', () => {
    const [issue] = find(
      issuesOf(base({ steps: [{ name: 'A', conditions: [{ type: 'sequence_match' }] }] })),
      'sequence_match_without_sequence',
    );
    expect(issue?.path).toBe('orchestration.steps[0].conditions[0].type');
  });

  it('reports an invalid regex, and regex features a linear-time engine cannot run', () => {
    const issues = issuesOf(
      base({
        steps: [
          {
            name: 'A',
            conditions: [
              { type: 'message_regex', value: '(unclosed' },
              { type: 'message_regex', value: '(?=lookahead)' },
              { type: 'message_regex', value: 'ok', flags: 'ix' },
            ],
          },
        ],
      }),
    );
    expect(find(issues, 'invalid_regex').map((i) => i.path)).toEqual([
      'orchestration.steps[0].conditions[0].value',
      'orchestration.steps[0].conditions[1].value',
      'orchestration.steps[0].conditions[2].value',
    ]);
    expect(find(issues, 'invalid_regex')[2]?.message).toMatch(/unknown regex flag "x"/);
  });

  it('reports a sequence tool that availableTools does not permit', () => {
    const [issue] = find(
      issuesOf(
        base({ steps: [{ name: 'A', sequence: ['search', 'think'], availableTools: { allowed: ['search'] } }] }),
      ),
      'sequence_tool_not_permitted',
    );
    expect(issue?.path).toBe('orchestration.steps[0].sequence[1]');
    const denied = issuesOf(
      base({ steps: [{ name: 'A', sequence: [['search', 'think']], availableTools: { denied: ['th*'] } }] }),
    );
    expect(find(denied, 'sequence_tool_not_permitted')[0]?.path).toBe('orchestration.steps[0].sequence[0][1]');
  });

  it('reports sequence and condition tools the agent does not have, only when the tool list is known', () => {
    const orchestration = {
      steps: [{ name: 'A', sequence: ['serch'], conditions: [{ type: 'tool_used', value: 'summarize' }] }],
    };
    const issues = find(issuesOf(base(orchestration)), 'unknown_tool');
    expect(issues.map((i) => i.path)).toEqual([
      'orchestration.steps[0].sequence[0]',
      'orchestration.steps[0].conditions[0].value',
    ]);
    expect(issues[0]?.hint).toBe('did you mean "search"?');
    expect(find(issuesOf({ id: 'a', orchestration }), 'unknown_tool')).toHaveLength(0);
  });

  it('reports unknown keys inside orchestration with a did-you-mean hint, and keeps unknown top-level keys', () => {
    const r = validateTemplate(
      base(
        {
          defualtStep: 'A',
          steps: [{ name: 'A', sequnce: ['search'], conditions: [{ type: 'tool_used', valu: 'x' }] }],
        },
        { chatSettings: { a: 1 } },
      ),
    );
    expect(r.success).toBe(false);
    if (r.success) return;
    const unknown = find(r.issues, 'unknown_key');
    expect(unknown.map((i) => [i.path, i.hint]).sort()).toEqual([
      ['orchestration.defualtStep', 'did you mean "defaultStep"?'],
      ['orchestration.steps[0].conditions[0].valu', 'did you mean "value"?'],
      ['orchestration.steps[0].sequnce', 'did you mean "sequence"?'],
    ]);
    const ok = validateTemplate({ id: 'x', chatSettings: { a: 1 }, somethingNew: [1] });
    expect(ok.success && ok.template.somethingNew).toEqual([1]);
  });

  it('reports wrong types with the path and what was expected', () => {
    const issues = issuesOf(
      base({ steps: [{ name: 3, sequence: 'search', conditions: [{ type: 'tool_used', value: 5 }] }] }),
    );
    expect(issues.map((i) => [i.path, i.message])).toEqual(
      expect.arrayContaining([
        ['orchestration.steps[0].name', 'expected a string, got number'],
        ['orchestration.steps[0].sequence', 'expected an array, got string'],
        ['orchestration.steps[0].conditions[0].value', 'expected a string, got number'],
      ]),
    );
  });

  it('reports every problem of a broken template in one pass', () => {
    const r = validateTemplate(
      base({
        defaultStep: 'nope',
        steps: [
          { name: 'A', conditions: [{ type: 'tool_used' }, { type: 'bogus' }] },
          { name: 'A', conditions: [{ type: 'sequence_match' }] },
        ],
      }),
    );
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(new Set(r.issues.map((i) => i.code))).toEqual(
        new Set([
          'unknown_default_step',
          'missing_value',
          'unknown_condition_type',
          'duplicate_step',
          'sequence_match_without_sequence',
        ]),
      );
    }
  });

  it('reports a missing id and invalid JSON text', () => {
    expect(find(issuesOf({ name: 'x' }), 'missing_id')).toHaveLength(1);
    const [json] = issuesOf('{"id": "a",');
    expect(json?.code).toBe('invalid_json');
    expect(issuesOf('[1]')[0]?.message).toMatch(/must be a JSON object, got an array/);
  });
});

describe('warnings (SPEC section 1)', () => {
  it('warns about a step that can never become active', () => {
    const r = validateTemplate(base({ steps: [{ name: 'Lonely' }, { name: 'D', isDefault: true }] }));
    expect(r.success).toBe(true);
    if (r.success)
      expect(r.warnings.map((w) => [w.code, w.path])).toEqual([['unreachable_step', 'orchestration.steps[0]']]);
  });

  it('warns about a step shadowed by an earlier step whose conditions it implies', () => {
    const r = validateTemplate(
      base({
        steps: [
          { name: 'Plan', conditions: [{ type: 'message_contains', value: 'plan' }] },
          {
            name: 'Planning',
            conditions: [
              { type: 'message_contains', value: 'PLANNING' },
              { type: 'tool_used', value: 'think' },
            ],
          },
          { name: 'Other', conditions: [{ type: 'message_contains', value: 'other' }] },
        ],
      }),
    );
    expect(r.success && r.warnings.map((w) => [w.code, w.path])).toEqual([['shadowed_step', 'orchestration.steps[1]']]);
  });

  it('accepts requireSequence on a step with a sequence, warns on one without, and rejects a non-boolean', () => {
    const ok = validateTemplate(
      base({ steps: [{ name: 'R', isDefault: true, sequence: ['search', 'think'], requireSequence: true }] }),
    );
    expect(ok.success && ok.warnings).toEqual([]);
    const pointless = validateTemplate(base({ steps: [{ name: 'R', isDefault: true, requireSequence: true }] }));
    expect(pointless.success && pointless.warnings.map((w) => [w.code, w.path])).toEqual([
      ['ignored_value', 'orchestration.steps[0].requireSequence'],
    ]);
    expect(
      issuesOf(base({ steps: [{ name: 'R', isDefault: true, sequence: ['search'], requireSequence: 'yes' }] })).map(
        (i) => [i.code, i.path],
      ),
    ).toEqual([['invalid_type', 'orchestration.steps[0].requireSequence']]);
  });
});

describe('the throwing forms', () => {
  it('parseTemplate throws one TemplateConfigError listing every issue, naming the file', () => {
    let error: unknown;
    try {
      parseTemplate(base({ steps: [{ name: 'A', conditions: [{ type: 'tool_used' }] }, { name: 'A' }] }), {
        file: 'agents/x.json',
      });
    } catch (e) {
      error = e;
    }
    expect(TemplateConfigError.isInstance(error)).toBe(true);
    const e = error as TemplateConfigError;
    expect(e.file).toBe('agents/x.json');
    expect(e.issues.length).toBeGreaterThanOrEqual(2);
    expect(e.message).toContain('Invalid agent template agents/x.json');
    expect(e.message).toContain('orchestration.steps[0].conditions[0].value');
    expect(e.message).toContain('orchestration.steps[1].name');
  });

  it('loadTemplate names a missing file and bad JSON', async () => {
    await expect(loadTemplate('/nonexistent/template.json')).rejects.toThrow(
      /\/nonexistent\/template.json.*no such file/s,
    );
    const dir = await mkdtemp(join(tmpdir(), 'baton-'));
    const file = join(dir, 'bad.json');
    await writeFile(file, '{"id": ');
    await expect(loadTemplate(file)).rejects.toThrow(/bad.json[\s\S]*not valid JSON/);
  });
});

describe('JSON Schema', () => {
  it('is committed and current (run `npm run schema` after changing the zod schema)', () => {
    const committed = JSON.parse(readFileSync(new URL('../../schema/template.schema.json', import.meta.url), 'utf8'));
    expect(committed).toEqual(JSON.parse(JSON.stringify(templateJsonSchema())));
  });

  it('describes the orchestration block and its steps', () => {
    const schema = templateJsonSchema() as { properties: Record<string, { properties?: Record<string, unknown> }> };
    expect(Object.keys(schema.properties.orchestration?.properties ?? {})).toEqual([
      'description',
      'defaultStep',
      'historyLimit',
      'shadow',
      'budget',
      'rules',
      'facts',
      'labels',
      'unlistedTools',
      'steps',
    ]);
  });
});
