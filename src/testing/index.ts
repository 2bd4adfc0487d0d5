/**
 * `baton-agents/testing`: helpers for testing code built on Baton, with no test framework
 * needed. The store conformance suite, which registers vitest tests, is
 * `baton-agents/testing/vitest`, so that importing these helpers never loads vitest.
 */
export { createFakeClock, type FakeClock } from './fake-clock.js';
export { type Script, ScriptedModel, type ScriptedTurn } from './scripted-model.js';
