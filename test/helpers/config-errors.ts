/** Catching the `TemplateConfigError` a misconfiguration throws, to read its issues. */
import { expect } from 'vitest';
import { TemplateConfigError } from '../../src/core/template-issues.js';

/** The `TemplateConfigError` that `create()` throws; fails the test when it throws anything else or nothing. */
export function configErrorOf(create: () => unknown): TemplateConfigError {
  let caught: unknown;
  try {
    create();
  } catch (error) {
    caught = error;
  }
  expect(TemplateConfigError.isInstance(caught), String(caught)).toBe(true);
  return caught as TemplateConfigError;
}
