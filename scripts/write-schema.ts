/**
 * Writes schema/template.schema.json from the zod schema (`npm run schema`). A test checks
 * the committed file is current.
 */
import { writeFileSync } from 'node:fs';
import { templateJsonSchema } from '../src/core/schema.js';

const target = new URL('../schema/template.schema.json', import.meta.url);
writeFileSync(target, `${JSON.stringify(templateJsonSchema(), null, 2)}\n`);
console.log(`wrote ${target.pathname}`);
