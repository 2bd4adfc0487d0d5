/**
 * `baton graph <template.json>`: the template's step selection as Mermaid or Graphviz
 * source; with `--session`, the session's active step (read from its store) is highlighted.
 */
import type { Writable } from 'node:stream';
import { Command, Option } from 'commander';
import { toDot, toMermaid } from '../core/template-graph.js';
import { redact, resolveStore } from '../stores/resolve-store.js';
import type { SessionStore } from '../stores/types.js';
import type { CliContext } from './program.js';
import { formatFileIssue, painter, readTemplateFile, wantsColor } from './template-file.js';

/** Output formats of `baton graph`. */
export const GRAPH_FORMATS = ['mermaid', 'dot'] as const;

/** Options of {@link runGraph}. */
export interface GraphOptions {
  templatePath: string;
  format: (typeof GRAPH_FORMATS)[number];
  /** Layout direction (default left to right). */
  direction?: 'LR' | 'TD';
  /** A session whose active step to highlight; needs `store`. */
  session?: string | undefined;
  /** Store URL of the session (`sqlite:path`, `redis://…`, `postgres://…`). */
  store?: string | undefined;
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
  env: Readonly<Record<string, string | undefined>>;
}

/** Prints the graph; resolves to 0, or 1 when the template, store or session cannot be used. */
export async function runGraph(options: GraphOptions): Promise<number> {
  const fail = (message: string) => {
    options.stderr.write(`baton graph: ${message}\n`);
    return 1;
  };
  if (options.session !== undefined && options.store === undefined) {
    return fail('--session needs --store, the store the session lives in (e.g. --store sqlite:.baton/state.db)');
  }
  if (options.store !== undefined && options.session === undefined) {
    return fail('--store is only read with --session <id>: name the session whose active step to highlight');
  }
  const loaded = await readTemplateFile(options.templatePath);
  if (!loaded.ok) {
    const paint = painter(wantsColor(options.stderr, options.env));
    options.stderr.write(`${loaded.issues.map((issue) => formatFileIssue(issue, paint)).join('\n')}\n`);
    return fail(`${options.templatePath} is not a valid template`);
  }

  let activeStep: string | undefined;
  if (options.session !== undefined && options.store !== undefined) {
    let store: SessionStore | undefined;
    try {
      store = await resolveStore(options.store);
      const state = await store.get(options.session);
      if (state === undefined) {
        return fail(`no session "${options.session}" in ${redact(options.store)} (it never existed or has expired)`);
      }
      activeStep = state.activeStep;
      const steps = loaded.template.orchestration?.steps ?? [];
      if (activeStep !== undefined && !steps.some((s) => s.name === activeStep)) {
        options.stderr.write(
          `baton graph: the session's active step "${activeStep}" is not a step of ${options.templatePath}; nothing is highlighted\n`,
        );
      }
    } catch (error) {
      return fail(error instanceof Error ? error.message : String(error));
    } finally {
      // An open Redis or PostgreSQL connection would keep the process alive.
      await store?.close().catch(() => undefined);
    }
  }

  const render = options.format === 'dot' ? toDot : toMermaid;
  options.stdout.write(render(loaded.template, { activeStep, direction: options.direction ?? 'LR' }));
  return 0;
}

/** `baton graph <template.json> [--format mermaid|dot] [--session <id> --store <url>]`. */
export function graphCommand(context: CliContext): Command {
  return new Command('graph')
    .description("Print a template's steps and what activates them as a Mermaid or Graphviz diagram.")
    .argument('<template>', 'path of the agent template (JSON)')
    .addOption(new Option('-f, --format <format>', 'output format').choices(GRAPH_FORMATS).default('mermaid'))
    .addOption(new Option('--direction <direction>', 'layout direction').choices(['LR', 'TD']).default('LR'))
    .option('-s, --session <id>', 'highlight the active step of this session (needs --store)')
    .option('--store <url>', 'where the session lives: sqlite:<path> | redis://… | postgres://…')
    .addHelpText(
      'after',
      [
        '',
        'Exit codes: 0 printed; 1 the template is invalid, or the store or session cannot be read.',
        '',
        'Examples:',
        '  baton graph examples/agents/cognitive-reasoner.json > graph.mmd',
        '  baton graph agent.json --format dot | dot -Tsvg > graph.svg',
        '  baton graph agent.json --session s1 --store sqlite:.baton/state.db',
      ].join('\n'),
    )
    .action(
      async (
        template: string,
        flags: { format: GraphOptions['format']; direction: 'LR' | 'TD'; session?: string; store?: string },
      ) => {
        context.setExitCode(
          await runGraph({
            templatePath: template,
            format: flags.format,
            direction: flags.direction,
            session: flags.session,
            store: flags.store,
            stdout: context.stdout as Writable,
            stderr: context.stderr as Writable & { isTTY?: boolean },
            env: context.env,
          }),
        );
      },
    );
}
