/**
 * Runs once before the test files: says in one line which suites a bare clone does not run, or
 * fails the run at once when CI (`BATON_REQUIRE_SERVICES=1`) lacks what they need.
 */
import { agentdockFixtures, agentdockFixturesProblem, howToSet } from './helpers/agentdock.js';

/** Vitest's global setup hook. */
export function setup(): void {
  // Throws under BATON_REQUIRE_SERVICES=1 when the folder is missing: a run that silently
  // skipped the suites over every AgentDock template would hide a regression.
  if (agentdockFixtures() === undefined) {
    console.warn(`AgentDock template suites not run: ${agentdockFixturesProblem()}; ${howToSet()}.`);
  }
}
