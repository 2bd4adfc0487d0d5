/**
 * The `baton` command line: one commander program, one sibling sub-command per file
 * (`chat` now; `serve`, `validate`, `simulate`, `graph` are added the same way).
 */
import type { ToolSet } from 'ai';
import { Command } from 'commander';
import { chatCommand } from './chat-command.js';
import { graphCommand } from './graph-command.js';
import { mcpCommand } from './mcp-command.js';
import { serveCommand } from './serve-command.js';
import { simulateCommand } from './simulate-command.js';
import { validateCommand } from './validate-command.js';

/** Where a command writes and what it may read; the bin passes the process's own. */
export interface CliContext {
  env: Readonly<Record<string, string | undefined>>;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream;
  /** Aborted on SIGINT/SIGTERM, so a command can stop cleanly. */
  signal: AbortSignal;
  /** Records the exit code a command wants (the bin sets `process.exitCode` from it). */
  setExitCode(code: number): void;
  /**
   * Tool implementations over the built-in ones, for a program that runs `baton serve` with its
   * own tools (the bin passes none). Workers of `--workers` run the same program, so they get
   * them too.
   */
  tools?: ToolSet;
}

/** Builds the `baton` program; add a sub-command with `program.addCommand(xCommand(context))`. */
export function createProgram(context: CliContext, version = '0.0.0'): Command {
  const program = new Command('baton')
    .description('Orchestration for tool-using LLM agents: steps, conditions and tool sequences.')
    .version(version)
    .showHelpAfterError()
    .configureOutput({
      writeOut: (text) => context.stdout.write(text),
      writeErr: (text) => context.stderr.write(text),
    });
  // Sub-commands built apart from the program inherit its settings (help after errors, output).
  program.addCommand(serveCommand(context).copyInheritedSettings(program));
  program.addCommand(chatCommand(context).copyInheritedSettings(program));
  program.addCommand(validateCommand(context).copyInheritedSettings(program));
  program.addCommand(simulateCommand(context).copyInheritedSettings(program));
  program.addCommand(graphCommand(context).copyInheritedSettings(program));
  program.addCommand(mcpCommand(context).copyInheritedSettings(program));
  return program;
}
