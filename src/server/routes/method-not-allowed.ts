/**
 * The answer to a method a route does not have: `405 method-not-allowed` with `Allow`.
 */
import type { Handler } from 'hono';
import { HttpError } from '../http-errors.js';

/** A handler for every other method on a path, listing the ones it has. */
export function methodNotAllowed(allow: string): Handler {
  return (c) => {
    throw new HttpError('method-not-allowed', `${c.req.method} is not supported on ${c.req.path}.`, {
      headers: { allow },
    });
  };
}
