// Creates each store and model whose package the app did not install, and prints what each
// attempt threw. Run by test/package-consumer.test.ts in an app without the optional packages.
import { createLLM } from 'baton-agents/ai-sdk';
import { postgresStore } from 'baton-agents/stores/postgres';
import { redisStore } from 'baton-agents/stores/redis';

const attempts = {
  ioredis: () => redisStore({ url: 'redis://127.0.0.1:1' }),
  pg: () => postgresStore({ connectionString: 'postgres://nobody@127.0.0.1:1/nothing' }),
  '@ai-sdk/openai': () => createLLM({ provider: 'openai', apiKey: 'unused' }),
  '@ai-sdk/anthropic': () => createLLM({ provider: 'anthropic', apiKey: 'unused' }),
  '@ai-sdk/openai-compatible': () => createLLM({ provider: 'openai-compatible', baseURL: 'http://127.0.0.1:1/v1' }),
};
const outcomes = {};
for (const [name, attempt] of Object.entries(attempts)) {
  try {
    attempt();
    outcomes[name] = { created: true };
  } catch (error) {
    outcomes[name] = { name: error.name, code: error.code, packageName: error.packageName, message: error.message };
  }
}
console.log(JSON.stringify(outcomes));
