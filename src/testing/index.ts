/**
 * Helpers for testing code built on Baton, and third-party stores.
 */
export { createFakeClock, type FakeClock } from './fake-clock.js';
export { type TestStoreFactoryOptions, type TestStoreOptions, testStore } from './test-store.js';
