// Run on a Node.js older than Baton supports: a SQLite store must fail with one clear error.
import { sqliteStore } from 'baton-agents/stores/sqlite';

try {
  sqliteStore({ path: ':memory:' });
  console.log(JSON.stringify({ created: true }));
} catch (error) {
  console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message }));
}
