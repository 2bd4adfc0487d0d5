/**
 * Condition types (SPEC section 2). Built-in and custom types share one definition shape,
 * and every condition is compiled once into a test function.
 */
import { RE2JS } from 're2js';
import { InvalidArgumentError } from './errors.js';
import type { OrchestrationStep, StepCondition } from './schema.js';

/** The latest user message, read once per message object. */
export interface MessageInfo {
  /** The message's text (text parts joined with newlines). */
  readonly text: string;
  /** `text` lower-cased, for case-insensitive conditions. */
  readonly lower: string;
  /** Identity of the message, so a message is handled as new only once. */
  readonly key: string;
  /**
   * A message kept behind a running call is kept as the answers of the plan's message-only
   * conditions, not as its text (so a session's state does not grow with what users type):
   * the indexes of those that hold. When set, `text` and `lower` are empty.
   */
  readonly matches?: ReadonlySet<number>;
}

/** What a condition is evaluated against. */
export interface ConditionContext {
  /** `recentlyUsedTools`: oldest first. */
  readonly history: readonly string[];
  /** The latest user message, if there is one. */
  readonly message: MessageInfo | undefined;
  /** The step's sequence as sets of alternatives (empty when it has none). */
  readonly sequence: readonly ReadonlySet<string>[];
}

/** A compiled condition. */
export type ConditionTest = (context: ConditionContext) => boolean;

/**
 * Defines a condition type; register custom ones with {@link registerConditionType}. A condition
 * answers from what its context gives it (the condition, the history, the message, the sequence)
 * and nothing else: no clock, no I/O. Baton keeps its answers, per message and per unchanged
 * session state, and replays them, so an answer that changed with anything else would not be
 * asked again.
 */
export interface ConditionDefinition {
  /** The `type` string used in templates. */
  readonly type: string;
  /** One line for docs and `baton validate`. */
  readonly description?: string;
  /** The condition needs a `value` (validation fails without one). */
  readonly requiresValue?: boolean;
  /** `value` names a tool, so validation checks the agent has it. */
  readonly valueIsTool?: boolean;
  /**
   * The condition reads the user message (so it can be named in `resetSequenceOn`). A condition
   * that reads `context.message` must say so: one that does not is evaluated without the text
   * while the message waits behind a running call.
   */
  readonly usesMessage?: boolean;
  /**
   * The condition reads the user message and nothing else (not the history, not the sequence),
   * so its answer can be kept instead of the text while the message waits behind a running
   * call. Plans whose message conditions are all `messageOnly` (the built-in ones are) keep no
   * message text in the state; a plan with another message condition keeps the text there.
   */
  readonly messageOnly?: boolean;
  /** Extra validation; returns a message describing what is wrong, or undefined. */
  readonly validate?: (condition: StepCondition, step: OrchestrationStep) => string | undefined;
  /** Compiles the condition once. Give either `compile` or `evaluate`. */
  readonly compile?: (condition: StepCondition) => ConditionTest;
  /** Evaluates the condition (used when there is no `compile`). Must be pure. */
  readonly evaluate?: (condition: StepCondition, context: ConditionContext) => boolean;
}

const DEFAULT_WINDOW = 5;
const REGEX_FLAGS: Record<string, number> = {
  i: RE2JS.CASE_INSENSITIVE,
  m: RE2JS.MULTILINE,
  s: RE2JS.DOTALL,
  u: 0, // RE2 is always Unicode-aware
};

/** Compiles a `message_regex` value with re2js (linear time); throws with the reason. */
export function compileRegex(source: string, flags = 'i'): RE2JS {
  let bits = 0;
  for (const flag of flags) {
    const bit = REGEX_FLAGS[flag];
    if (bit === undefined) throw new Error(`unknown regex flag "${flag}" (use i, m, s or u)`);
    bits |= bit;
  }
  return RE2JS.compile(source, bits);
}

/**
 * The alternatives of a regex that is only plain text joined by `|` (ASCII letters, digits,
 * spaces and punctuation that means itself in RE2), lower-cased when `caseless`; undefined for
 * any other regex. Such a regex matches exactly when the text contains one of them.
 */
export function literalAlternatives(source: string, caseless: boolean): readonly string[] | undefined {
  if (!/^[A-Za-z0-9 ,'"!#%&:;<=>@_~/`|-]*$/.test(source)) return undefined;
  return source.split('|').map((word) => (caseless ? word.toLowerCase() : word));
}

/**
 * `text` lower-cased as RE2's case-insensitive matching compares it with ASCII: `toLowerCase`,
 * except that the long s (U+017F) folds to `s`, as in RE2, and the dotted capital I (U+0130),
 * which `toLowerCase` turns into `i` and a combining dot but RE2 does not fold to `i`, matches no
 * ASCII letter. (The Kelvin sign, U+212A, becomes `k` in both.)
 */
export function foldAscii(text: string): string {
  let lower = (text.includes('\u0130') ? text.replaceAll('\u0130', '\ufffd') : text).toLowerCase();
  if (lower.includes('\u017f')) lower = lower.replaceAll('\u017f', 's');
  return lower;
}

function containsAny(text: string, words: readonly string[]): boolean {
  for (const word of words) if (text.includes(word)) return true;
  return false;
}

const builtins: ConditionDefinition[] = [
  {
    type: 'tool_used',
    description: 'value occurs anywhere in recentlyUsedTools',
    requiresValue: true,
    valueIsTool: true,
    compile: (c) => {
      const tool = c.value ?? '';
      return (ctx) => ctx.history.includes(tool);
    },
  },
  {
    type: 'sequence_match',
    description: "the last n tools used match this step's sequence (n = its length)",
    validate: (_c, step) =>
      step.sequence === undefined || step.sequence.length === 0
        ? 'sequence_match needs the step to have a non-empty "sequence"'
        : undefined,
    compile: () => (ctx) => {
      const n = ctx.sequence.length;
      const h = ctx.history;
      if (n === 0 || h.length < n) return false;
      const offset = h.length - n;
      for (let i = 0; i < n; i++) {
        if (!ctx.sequence[i]!.has(h[offset + i]!)) return false;
      }
      return true;
    },
  },
  {
    type: 'message_contains',
    description: 'the latest user message contains value, case-insensitively',
    requiresValue: true,
    usesMessage: true,
    messageOnly: true,
    compile: (c) => {
      const needle = (c.value ?? '').toLowerCase();
      return (ctx) => ctx.message?.lower.includes(needle) === true;
    },
  },
  {
    type: 'message_regex',
    description: 'value (a regex, flags default "i") matches the latest user message',
    requiresValue: true,
    usesMessage: true,
    messageOnly: true,
    validate: (c) => {
      try {
        compileRegex(c.value ?? '', c.flags ?? 'i');
        return undefined;
      } catch (error) {
        return `invalid regex: ${(error as Error).message}`;
      }
    },
    compile: (c) => {
      const flags = c.flags ?? 'i';
      const regex = compileRegex(c.value ?? '', flags);
      // Most intent patterns are words joined by `|`: those are searched for as text, which
      // gives RE2's answer (a property test compares the two) at a tenth of its cost on a long message.
      const words = literalAlternatives(c.value ?? '', flags.includes('i'));
      const test =
        words === undefined
          ? (text: string) => regex.test(text)
          : (text: string) => containsAny(flags.includes('i') ? foldAscii(text) : text, words);
      // Selection runs several times per turn on the same message: remember each answer.
      const memo = new WeakMap<MessageInfo, boolean>();
      return (ctx) => {
        const message = ctx.message;
        if (message === undefined) return false;
        let hit = memo.get(message);
        if (hit === undefined) {
          hit = test(message.text);
          memo.set(message, hit);
        }
        return hit;
      };
    },
  },
  {
    type: 'not_recently_used',
    description: 'value is absent from the last window (default 5) tools used',
    requiresValue: true,
    valueIsTool: true,
    compile: (c) => {
      const tool = c.value ?? '';
      const window = c.window ?? DEFAULT_WINDOW;
      return (ctx) => {
        const h = ctx.history;
        for (let i = Math.max(0, h.length - window); i < h.length; i++) if (h[i] === tool) return false;
        return true;
      };
    },
  },
];

const BUILTIN_DEFINITIONS: ReadonlySet<ConditionDefinition> = new Set(builtins);

/**
 * `type` when `registry` defines it with the built-in definition (so its meaning is known, for
 * indexes such as step selection's), else undefined.
 */
export function builtinConditionType(registry: ConditionRegistry, type: string): string | undefined {
  const definition = registry.get(type);
  return definition !== undefined && BUILTIN_DEFINITIONS.has(definition) ? type : undefined;
}

/** Extra keys each built-in type accepts besides `type`, `value` and `description`. */
export const BUILTIN_EXTRA_KEYS: Readonly<Record<string, readonly string[]>> = {
  message_regex: ['flags'],
  not_recently_used: ['window'],
};

/** A set of condition types. Plans compiled with different registries are cached apart. */
export class ConditionRegistry {
  readonly #definitions = new Map<string, ConditionDefinition>();

  constructor(definitions: readonly ConditionDefinition[] = builtins) {
    for (const d of definitions) this.register(d);
  }

  /** Adds a condition type; throws if the type is already defined or the definition is incomplete. */
  register(definition: ConditionDefinition): this {
    if (typeof definition?.type !== 'string' || definition.type.length === 0) {
      throw new InvalidArgumentError('definition.type', 'a condition type needs a non-empty string type');
    }
    if (this.#definitions.has(definition.type)) {
      throw new InvalidArgumentError('definition.type', `condition type "${definition.type}" is already registered`);
    }
    if ((definition.compile === undefined) === (definition.evaluate === undefined)) {
      throw new InvalidArgumentError(
        'definition',
        `condition type "${definition.type}" needs exactly one of compile() or evaluate()`,
      );
    }
    this.#definitions.set(definition.type, definition);
    return this;
  }

  /** The definition of `type`, if registered. */
  get(type: string): ConditionDefinition | undefined {
    return this.#definitions.get(type);
  }

  /** Every registered type name. */
  types(): string[] {
    return [...this.#definitions.keys()];
  }

  /** Compiles `condition`; the type must be registered (validation guarantees it). */
  compile(condition: StepCondition): ConditionTest {
    const definition = this.#definitions.get(condition.type);
    if (definition === undefined) {
      throw new InvalidArgumentError('condition.type', `unknown condition type "${condition.type}"`);
    }
    if (definition.compile) return definition.compile(condition);
    const evaluate = definition.evaluate!;
    return (context) => evaluate(condition, context);
  }

  /** How `condition` reads the user message: not at all, only the message, or with other things. */
  messageUse(condition: StepCondition): 'none' | 'only' | 'mixed' {
    const definition = this.#definitions.get(condition.type);
    if (definition?.usesMessage !== true) return 'none';
    return definition.messageOnly === true ? 'only' : 'mixed';
  }
}

/** The registry used when none is passed: the built-in types plus any registered with {@link registerConditionType}. */
export const defaultConditionRegistry: ConditionRegistry = new ConditionRegistry();

/** Registers a custom condition type in the default registry. */
export function registerConditionType(definition: ConditionDefinition): void {
  defaultConditionRegistry.register(definition);
}
