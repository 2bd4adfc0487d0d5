/**
 * The `simulate` sub-command: parses its flags and hands over to {@link runSimulate}.
 */
import type { Readable, Writable } from 'node:stream';
import { Command } from 'commander';
import type { CliContext } from './program.js';
import { runSimulate } from './simulate.js';

/** `baton simulate <template.json> --events <file.jsonl | -> [--json]`. */
export function simulateCommand(context: CliContext): Command {
  return new Command('simulate')
    .description(
      'Replay user messages and tool calls against a template without a model, showing the active step, sequence and allowed tools after each.',
    )
    .argument('<template>', 'path of the agent template (JSON)')
    .requiredOption('-e, --events <file>', 'events, one JSON object per line (JSONL); - reads them from stdin')
    .option('--json', 'print one JSON object per event instead of the table')
    .addHelpText(
      'after',
      [
        '',
        'Events (blank lines and lines starting with // are skipped):',
        '  {"user": "How many EVs by 2030?"}   a new user message; step selection runs',
        '  {"tool": "search"}                  the model calls a tool: rejected (and not recorded) when it is',
        '                                      not allowed right now, recorded when it is',
        'Any event may carry expectations, checked right after it:',
        '  {"tool": "think", "expect": {"step": "ResearchMode", "allowed": ["reflect"], "sequenceIndex": 2}}',
        '  {"tool": "debate", "expect": {"rejected": true}}     ("step": null = no active step)',
        '',
        'Exit codes:',
        '  0  replayed, every expectation held',
        '  1  an expectation failed, or the template is invalid or cannot be read',
        '  2  the events cannot be read or have bad lines (each printed as file:line: what is wrong)',
        '',
        'Example:',
        '  baton simulate examples/agents/cognitive-reasoner.json --events examples/agents/cognitive-reasoner.events.jsonl',
      ].join('\n'),
    )
    .action(async (template: string, flags: { events: string; json?: boolean }) => {
      context.setExitCode(
        await runSimulate({
          templatePath: template,
          eventsPath: flags.events,
          json: flags.json === true,
          stdin: context.stdin as Readable,
          stdout: context.stdout as Writable & { isTTY?: boolean },
          stderr: context.stderr as Writable,
          env: context.env,
        }),
      );
    });
}
