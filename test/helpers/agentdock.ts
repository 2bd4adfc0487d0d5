/**
 * AgentDock's published agent templates: the real-world inputs the template suites run over.
 *
 * The whole set lives outside the repository; `BATON_AGENTDOCK_FIXTURES` names its folder
 * (`.ci/run` sets it). Without it the suites over the whole set do not run, and
 * `test/global-setup.ts` says so in one line; with `BATON_REQUIRE_SERVICES=1` (CI) a missing
 * or empty folder fails the run instead. Four of the templates are copied into
 * `test/fixtures/agentdock/`, so the tests that need one real template run in any clone.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { servicesRequired } from './services.js';

/** The variable that names the folder of every AgentDock template. */
export const AGENTDOCK_FIXTURES_ENV = 'BATON_AGENTDOCK_FIXTURES';

const ROOT = new URL('../..', import.meta.url).pathname;

/** The folder of the four AgentDock templates copied into the repository. */
export const AGENTDOCK_SAMPLE_DIR = join(ROOT, 'test/fixtures/agentdock');

/** The names of the copied templates (each has an `orchestration` block). */
export type AgentdockSample = 'cognitive-reasoner' | 'dr-house' | 'history-mentor' | 'orchestrated-agent';

/** The path of one of the copied AgentDock templates. */
export function agentdockSample(name: AgentdockSample): string {
  return join(AGENTDOCK_SAMPLE_DIR, `${name}.json`);
}

/** Every copied template's path, sorted. */
export const agentdockSampleFiles: readonly string[] = jsonFiles(AGENTDOCK_SAMPLE_DIR);

/** The whole set of AgentDock templates, when the environment names it. */
export interface AgentdockFixtures {
  /** The folder, absolute. */
  dir: string;
  /** Every `*.json` in it, absolute and sorted. */
  files: readonly string[];
}

/** Why the whole set is not available, or undefined when it is. */
export function agentdockFixturesProblem(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const named = env[AGENTDOCK_FIXTURES_ENV]?.trim();
  if (!named) return `${AGENTDOCK_FIXTURES_ENV} is not set`;
  const dir = resolve(named);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) return `${AGENTDOCK_FIXTURES_ENV}=${named} is not a folder`;
  if (jsonFiles(dir).length === 0) return `${AGENTDOCK_FIXTURES_ENV}=${named} holds no *.json templates`;
  return undefined;
}

/**
 * The whole set, or undefined when the environment does not name it (the suites over it are
 * skipped). Throws when it must be there (`BATON_REQUIRE_SERVICES=1`) and is not.
 */
export function agentdockFixtures(env: NodeJS.ProcessEnv = process.env): AgentdockFixtures | undefined {
  const problem = agentdockFixturesProblem(env);
  if (problem !== undefined) {
    if (servicesRequired()) throw new Error(`BATON_REQUIRE_SERVICES=1 but ${problem}: ${howToSet()}`);
    return undefined;
  }
  const dir = resolve(env[AGENTDOCK_FIXTURES_ENV]!.trim());
  return { dir, files: jsonFiles(dir) };
}

/**
 * The AgentDock templates a suite can run over here: every published one when the environment
 * names them, else the four copied into the repository (all of which the whole set holds).
 */
export function agentdockTemplateFiles(env: NodeJS.ProcessEnv = process.env): readonly string[] {
  return agentdockFixtures(env)?.files ?? agentdockSampleFiles;
}

/** What to do about a missing set, for messages. */
export function howToSet(): string {
  return `set ${AGENTDOCK_FIXTURES_ENV} to a folder of AgentDock's template.json files (.ci/run sets it)`;
}

function jsonFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => join(dir, file));
}
