/**
 * The options of Baton's factories (`createApp`, `createAgent`, `orchestrate`,
 * `OrchestratedAgent`), checked when they are created: every problem at once, each with its
 * path, as template problems are (the same {@link TemplateIssue}s, thrown as one
 * {@link TemplateConfigError}). A misconfiguration then fails where the app starts, not as a 500
 * on its first request.
 *
 * The shapes are zod schemas: zod reports every issue with its path, and an unknown option (a
 * typo, say `webroot`) gets a "did you mean" hint from the keys the schema knows.
 */
import { z } from 'zod/v4';
import {
  TemplateIssueCode as Code,
  didYouMean,
  formatPath,
  TemplateConfigError,
  type TemplateIssue,
} from './template-issues.js';

/**
 * A schema that knows the option names of `T` only, to refuse any other with a did-you-mean
 * (each value is checked where it is used). Every key of `T`, and no other, must be listed: the
 * compiler checks it, so a new option does not compile until it is known here.
 */
export function optionNames<T>(names: { readonly [K in keyof Required<T>]: true }): z.ZodType {
  return z.strictObject(Object.fromEntries(Object.keys(names).map((key) => [key, z.unknown().optional()])));
}

/** Issues of `value` against `schema`, each at `base` plus its own path. */
export function optionIssues(schema: z.ZodType, value: unknown, base: readonly PropertyKey[] = []): TemplateIssue[] {
  const result = schema.safeParse(value);
  if (result.success) return [];
  const issues: TemplateIssue[] = [];
  for (const issue of result.error.issues) {
    const path = [...base, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      const known = keysAt(schema, issue.path);
      for (const key of issue.keys) {
        const hint = didYouMean(key, known);
        issues.push({
          code: Code.UnknownKey,
          severity: 'error',
          path: formatPath([...path, key]),
          message: `unknown option "${key}"`,
          ...(hint ? { hint } : {}),
        });
      }
      continue;
    }
    issues.push({
      code: issue.code === 'invalid_type' ? Code.InvalidType : Code.InvalidValue,
      severity: 'error',
      path: formatPath(path),
      message: issue.message,
    });
  }
  return issues;
}

/** The issues with `prefix` put before each path (`agents[1]` + `orchestration.rulez`). */
export function prefixIssues(issues: readonly TemplateIssue[], prefix: string): TemplateIssue[] {
  return issues.map((issue) => ({
    ...issue,
    path:
      issue.path === '' ? prefix : issue.path.startsWith('[') ? `${prefix}${issue.path}` : `${prefix}.${issue.path}`,
  }));
}

/** Throws one {@link TemplateConfigError} listing every issue when any is an error. */
export function throwOnErrors(issues: readonly TemplateIssue[], subject: string): void {
  if (issues.some((issue) => issue.severity === 'error')) {
    // Errors first, as template validation orders them.
    const sorted = [...issues.filter((i) => i.severity === 'error'), ...issues.filter((i) => i.severity !== 'error')];
    throw new TemplateConfigError(sorted, undefined, subject);
  }
}

/** Any object, with what was expected in the error (`expected an AI SDK tool`). */
export const objectSchema = (what: string) =>
  z.custom<object>((value) => typeof value === 'object' && value !== null, what);

/**
 * A template (or orchestration block) object, with what was expected in the error. A Promise is
 * refused with the fix: `loadTemplate()` is async, and a forgotten `await` would otherwise pass
 * as an object with no orchestration, which enforces nothing.
 */
export const templateObjectSchema = (what: string) =>
  z.unknown().superRefine((value, context) => {
    if (typeof value !== 'object' || value === null) context.addIssue({ code: 'custom', message: what });
    else if (typeof (value as { then?: unknown }).then === 'function') {
      context.addIssue({ code: 'custom', message: `${what}, got a Promise: await loadTemplate(...) first` });
    }
  });

/**
 * An OrchestrationManager, from this copy of the package or another (a second copy in an app's
 * bundle is a different class, so this is a duck-type check, not `instanceof`).
 */
export const managerSchema = z.custom<object>(
  (value) =>
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { plan?: unknown }).plan === 'function' &&
    typeof (value as { getStateManager?: unknown }).getStateManager === 'function',
  'expected an OrchestrationManager (createOrchestrationManager())',
);

/** A store: its URL, or a SessionStore object. */
export const storeSchema = z.union([
  z.string(),
  z.custom<object>(
    (value) =>
      typeof value === 'object' && value !== null && typeof (value as { update?: unknown }).update === 'function',
    'expected a store URL or a SessionStore',
  ),
]);

/** The agent's tools: a record of AI SDK tools. */
export const toolsSchema = z.record(z.string(), objectSchema('expected an AI SDK tool (tool({ ... }))'));

/** A function, for schemas of callback options. */
export const functionSchema = z.custom<(...args: never[]) => unknown>(
  (value) => typeof value === 'function',
  'expected a function',
);

/** The keys an object schema knows at `path` (for "did you mean" hints). */
function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let current: z.ZodType | undefined = schema;
  for (const key of path) {
    const object = unwrap(current);
    current = object instanceof z.ZodObject ? (object.shape as Record<PropertyKey, z.ZodType>)[key] : undefined;
  }
  const object = unwrap(current);
  return object instanceof z.ZodObject ? Object.keys(object.shape) : [];
}

function unwrap(schema: z.ZodType | undefined): z.ZodType | undefined {
  let current = schema;
  while (current instanceof z.ZodOptional || current instanceof z.ZodNullable || current instanceof z.ZodDefault)
    current = current.unwrap() as z.ZodType;
  return current;
}
