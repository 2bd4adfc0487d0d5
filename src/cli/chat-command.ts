/**
 * The `chat` sub-command: parses its flags and hands over to {@link runChat}.
 */
import type { Readable, Writable } from 'node:stream';
import { Command } from 'commander';
import { runChat } from './chat.js';
import type { CliContext } from './program.js';

/** `baton chat <template> [--model spec] [--session id] [--store url] [--tools module]`. */
export function chatCommand(context: CliContext): Command {
  return new Command('chat')
    .description('Chat with an agent in the terminal (or from a pipe), showing its steps and tool calls.')
    .argument('<template>', 'path of the agent template (JSON)')
    .option(
      '-m, --model <spec>',
      'offline | openai:<model> | anthropic:<model> | openai-compatible:<model>@<baseURL> (default: $BATON_MODEL, else the template)',
    )
    .option('-s, --session <id>', 'session id, to continue a session kept in --store (default: a new one)')
    .option('--store <url>', 'session state: memory: | sqlite:<path> | redis://… | postgres://… (default: memory)')
    .option(
      '--tools <module>',
      'your tools: a .js (or, on Node.js 22.18+, .ts) module whose named exports are AI SDK tools, by the names templates use',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  baton chat examples/agents/cognitive-reasoner.json --model offline\n  printf "q1\\nq2\\n" | baton chat agent.json --model openai:gpt-4o',
    )
    .action(async (template: string, flags: { model?: string; session?: string; store?: string; tools?: string }) => {
      const code = await runChat({
        templatePath: template,
        model: flags.model,
        session: flags.session,
        store: flags.store,
        toolsPath: flags.tools,
        env: context.env,
        input: context.stdin as Readable & { isTTY?: boolean },
        output: context.stdout as Writable & { isTTY?: boolean },
        errorOutput: context.stderr as Writable,
        signal: context.signal,
      });
      context.setExitCode(code);
    });
}
