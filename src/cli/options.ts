/**
 * The command-line flags `baton serve` and `baton mcp` share, declared once: how each is parsed,
 * named and defaulted. The help text is each command's own (what the flag means there).
 */
import { InvalidArgumentError, Option } from 'commander';
import { DEFAULT_EVENT_LOG } from '../server/create-app.js';
import type { CliContext } from './program.js';

/** A parser of `name`'s value: a whole number >= `min`, or a usage error naming the flag. */
export function integer(name: string, min: number): (value: string) => number {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < min)
      throw new InvalidArgumentError(`${name} must be a whole number >= ${min}.`);
    return n;
  };
}

/** A parser of a port (`name` says where it came from: `--port`, `$PORT`): 0 (any free one) to 65535. */
export function portNumber(name: string): (value: string) => number {
  return (value: string) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isSafeInteger(n) || n < 0 || n > 65535)
      throw new InvalidArgumentError(
        `${name} must be a port number from 0 to 65535 (0 picks a free one), not "${value}".`,
      );
    return n;
  };
}

/** `--store <url>`, defaulting to `$BATON_STORE`, else `fallback`. */
export function storeOption(context: CliContext, description: string, fallback: string): Option {
  return new Option('--store <url>', description).default(context.env.BATON_STORE ?? fallback);
}

/** `--host <host>`: the interface to listen on (default loopback). */
export function hostOption(description: string): Option {
  return new Option('--host <host>', description).default('127.0.0.1');
}

/** `--cors <origins>`, defaulting to `$BATON_CORS_ORIGINS`, else none. */
export function corsOption(context: CliContext, description: string): Option {
  return new Option('--cors <origins>', description).default(context.env.BATON_CORS_ORIGINS ?? '');
}

/** `--event-log <n>`: decisions kept per session (0: none). */
export function eventLogOption(description: string): Option {
  return new Option('--event-log <n>', description).argParser(integer('--event-log', 0)).default(DEFAULT_EVENT_LOG);
}

/** `--lease <ms>`: how long a running call's reservation lasts without renewal. */
export function leaseOption(description: string): Option {
  return new Option('--lease <ms>', description).argParser(integer('--lease', 1));
}

/** `--policy <file>`: the operator's policy, rules judged before every template's. */
export function policyOption(): Option {
  return new Option(
    '--policy <file>',
    'the operator\'s policy (JSON: { "rules": [...] }): rules judged before every template\'s, that no template can loosen; limits may count across sessions ("scope": "principal" | "agent" | "global")',
  );
}

/** `--max-turns <n>`: most turns (or calls) that run at once. */
export function maxTurnsOption(description: string): Option {
  return new Option('--max-turns <n>', description).argParser(integer('--max-turns', 1));
}

/** `--max-queued-turns <n>`: how many wait for a slot before more are refused. */
export function maxQueuedTurnsOption(description: string): Option {
  return new Option('--max-queued-turns <n>', description).argParser(integer('--max-queued-turns', 0));
}
