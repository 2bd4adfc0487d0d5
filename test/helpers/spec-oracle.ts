/**
 * A reference interpreter of SPEC sections 3 to 5, written over the raw config without any
 * engine code, for property tests: the engine and the transition are checked against it.
 */
import type { ChatMessage } from '../../src/core/messages.js';
import type { OrchestrationConfig, OrchestrationStep, StepCondition } from '../../src/core/schema.js';
import { permittedBy } from '../../src/testing/arbitraries.js';

// ---------------------------------------------------------------------------------------
// The oracle: SPEC sections 3 (step selection), 4 (allowed tools) and 5 (recording), read
// literally, over the raw config. No engine code: conditions are re-implemented here, and
// message_regex uses the JavaScript RegExp engine (the engine uses re2js). The `u` flag
// makes JS case-insensitive matching use Unicode simple case folding, as RE2 does.

/** What the oracle expects the engine to report (the SPEC-relevant fields only). */
export type ExpectedEvent =
  | { type: 'step-changed'; from: string | undefined; to: string | undefined }
  | { type: 'sequence-violation'; step: string; tool: string }
  | { type: 'sequence-blocked'; step: string };

export const positionTools = (position: string | string[]): string[] =>
  typeof position === 'string' ? [position] : position;

/** The latest `role: "user"` message: its position in the conversation and its text. */
export function latestUser(messages: readonly ChatMessage[]): { at: number; text: string } | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'user') return { at: i, text: m.content as string };
  }
  return undefined;
}

/** The SPEC, read literally: one session's state and the rules that change it. */
export class Oracle {
  active: string | undefined;
  index = 0;
  history: string[] = [];
  /** Position of the last user message already handled (a message is new once). */
  handled = -1;
  readonly limit: number;

  constructor(
    readonly config: OrchestrationConfig,
    managerHistoryLimit: number | undefined,
  ) {
    // The config's historyLimit wins over the manager option (default 50).
    this.limit = config.historyLimit ?? managerHistoryLimit ?? 50;
  }

  step(name: string | undefined): OrchestrationStep | undefined {
    return this.config.steps.find((s) => s.name === name);
  }

  /** SPEC section 2. */
  holds(c: StepCondition, step: OrchestrationStep, message: string | undefined): boolean {
    switch (c.type) {
      case 'tool_used':
        return this.history.includes(c.value!);
      case 'sequence_match': {
        const sequence = step.sequence ?? [];
        if (sequence.length === 0 || this.history.length < sequence.length) return false;
        const tail = this.history.slice(this.history.length - sequence.length);
        return sequence.every((p, i) => positionTools(p).includes(tail[i]!));
      }
      case 'message_contains':
        return message?.toLowerCase().includes(c.value!.toLowerCase()) === true;
      case 'message_regex':
        return message !== undefined && new RegExp(c.value!, `${c.flags ?? 'i'}u`).test(message);
      case 'not_recently_used':
        return !this.history.slice(Math.max(0, this.history.length - (c.window ?? 5))).includes(c.value!);
      default:
        throw new Error(`oracle: unsupported condition type ${c.type}`);
    }
  }

  /** SPEC section 3. */
  select(message: string | undefined, out: ExpectedEvent[]): void {
    const first = this.config.steps.find(
      (s) =>
        s.conditions !== undefined && s.conditions.length > 0 && s.conditions.every((c) => this.holds(c, s, message)),
    );
    let chosen: string | undefined;
    if (first !== undefined) chosen = first.name;
    else if (this.step(this.active) !== undefined) chosen = this.active;
    else chosen = this.config.defaultStep ?? this.config.steps.find((s) => s.isDefault === true)?.name;
    if (chosen !== this.active) {
      out.push({ type: 'step-changed', from: this.active, to: chosen });
      this.active = chosen;
      this.index = 0;
    }
  }

  /** A manager call sees the conversation: a new user message applies resetSequenceOn (SPEC 5), then SPEC 3 runs. */
  observe(messages: readonly ChatMessage[], out: ExpectedEvent[]): void {
    const latest = latestUser(messages);
    if (latest !== undefined && latest.at !== this.handled) {
      this.handled = latest.at;
      const step = this.step(this.active);
      for (const rule of step?.resetSequenceOn ?? []) {
        const fires =
          rule === 'new_message' ||
          (typeof rule === 'object' && this.holds(rule, step!, latest.text)) ||
          (typeof rule === 'string' &&
            rule !== 'out_of_sequence' &&
            (step!.conditions ?? []).some((c) => c.type === rule && this.holds(c, step!, latest.text)));
        if (fires) this.index = 0;
      }
    }
    this.select(latest?.text, out);
  }

  /** SPEC section 5. */
  record(tool: string, messages: readonly ChatMessage[], out: ExpectedEvent[]): void {
    this.observe(messages, out);
    this.history.push(tool);
    if (this.history.length > this.limit) this.history = this.history.slice(this.history.length - this.limit);
    const step = this.step(this.active);
    const sequence = step?.sequence ?? [];
    if (step !== undefined && this.index < sequence.length) {
      if (positionTools(sequence[this.index]!).includes(tool)) this.index++;
      else {
        out.push({ type: 'sequence-violation', step: step.name, tool });
        if (step.resetSequenceOn?.includes('out_of_sequence')) this.index = 0;
      }
    }
    this.select(latestUser(messages)?.text, out);
  }

  /** `setActiveStep`: a change restarts the sequence; no selection runs. */
  force(name: string): void {
    if (name !== this.active) {
      this.active = name;
      this.index = 0;
    }
  }

  /** SPEC section 4, on the current state (no selection). */
  allowed(agentTools: readonly string[], out: ExpectedEvent[] = []): string[] {
    const step = this.step(this.active);
    if (step === undefined) return [...agentTools];
    const permitted = agentTools.filter((t) => permittedBy(step.availableTools, t));
    const sequence = step.sequence ?? [];
    if (this.index >= sequence.length) return permitted;
    const position = positionTools(sequence[this.index]!);
    const tools = permitted.filter((t) => position.includes(t));
    if (tools.length === 0) out.push({ type: 'sequence-blocked', step: step.name });
    return tools;
  }
}
