/**
 * `baton-agents/testing/vitest`: the store conformance suite, for vitest test files of
 * third-party stores. Apart from `baton-agents/testing` because it imports vitest, an optional
 * peer dependency that users of the other helpers need not install.
 */
export { type TestStoreFactoryOptions, type TestStoreOptions, testStore } from './test-store.js';
