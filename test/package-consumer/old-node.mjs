// Run on a Node.js older than Baton supports: a SQLite store, and an app that names one, must
// fail with one clear error when they are created (not at the first request).
import { createApp } from 'baton-agents/server';
import { sqliteStore } from 'baton-agents/stores/sqlite';

function outcome(create) {
  try {
    create();
    return { created: true };
  } catch (error) {
    return { name: error.name, code: error.code, message: error.message };
  }
}

console.log(
  JSON.stringify({
    store: outcome(() => sqliteStore({ path: ':memory:' })),
    app: outcome(() => createApp({ agents: [], store: 'sqlite:never-opened.db', webRoot: false })),
  }),
);
