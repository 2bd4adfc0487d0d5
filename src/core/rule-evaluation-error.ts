/**
 * The error of a rule that cannot be evaluated for a call (a missing key, a type error at run
 * time, arguments too large, an invalid `matches()` pattern). Its own module because both sides
 * of a rule throw it: the expression's evaluation (`rule-expressions.ts`) and the reading of a
 * call's arguments (`rules.ts`); the layer that decides calls refuses the call with its message.
 */

/** A rule could not be evaluated for a call; the call is refused with this message. */
export class RuleEvaluationError extends Error {
  override readonly name = 'RuleEvaluationError';
}
