/**
 * The cognitive tools (`think`, `reflect`, `critique`, `debate`, `brainstorm`, `compare`), after
 * AgentDock's suite of the same names. Like AgentDock's, they call no model: the model writes the
 * content, and the tool gives it a fixed structure (numbered steps, positions, a table) that the
 * conversation, a UI and the orchestration can rely on. Each `structure*` function is pure and
 * deterministic; the tools are thin AI SDK wrappers around them.
 */
// Each tool is annotated `Tool<Input, Output>`: an inferred type would spell out types of
// @ai-sdk/provider-utils in the published declarations, a package apps do not depend on.
import { type Tool, tool } from 'ai';
import { z } from 'zod/v4';

// Shared text helpers --------------------------------------------------------------------------

/** Trims and collapses runs of whitespace. */
function clean(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

const LIST_MARKER = /^\s*(?:[-*•]|\d+[.)]|\(\d+\))\s+/;

/**
 * Splits free text into points: one per line when the text is a list or has several lines,
 * otherwise one per sentence. Models write both forms, and both should give the same structure.
 */
export function splitPoints(text: string): string[] {
  const lines = text
    .split(/\r?\n/)
    .map((line) => clean(line.replace(LIST_MARKER, '')))
    .filter((line) => line !== '');
  if (lines.length > 1) return lines;
  return splitSentences(lines[0] ?? '');
}

/** Splits text after `.`, `!` or `?` followed by whitespace, so "2.5 million" stays whole. */
export function splitSentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+/)
    .map((sentence) => clean(sentence))
    .filter((sentence) => sentence !== '');
}

/** Removes repeated entries (case-insensitively), keeping the first spelling and the order. */
function unique(items: readonly string[]): string[] {
  const seen = new Set<string>();
  return items.filter((item) => {
    const key = item.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Splits `"Label: text"` into its parts; `label` is undefined when there is no short label. */
function labelled(text: string): { label: string | undefined; body: string } {
  const match = /^([^:]{1,40}):\s+(.+)$/s.exec(text);
  return match ? { label: clean(match[1]!), body: clean(match[2]!) } : { label: undefined, body: clean(text) };
}

const plural = (count: number, word: string, many = `${word}s`) => `${count} ${count === 1 ? word : many}`;

const topicField = (what: string) => z.string().trim().min(1).describe(what);

// think ----------------------------------------------------------------------------------------

const thinkInput = z.object({
  topic: topicField('The question or problem being reasoned about, in one line'),
  thought: z
    .string()
    .trim()
    .min(1)
    .describe('Your step-by-step reasoning: one step per sentence or per line (a numbered list works well)'),
  confidence: z.number().min(0).max(1).optional().describe('How sure you are of the conclusion, from 0 to 1'),
});

/** Input of `think`. */
export type ThinkInput = z.infer<typeof thinkInput>;

/** Output of `think`: the reasoning as numbered steps. */
export interface ThinkOutput {
  topic: string;
  reasoning: string;
  steps: { step: number; text: string }[];
  /** The last step, which usually states where the reasoning arrives. */
  conclusion: string;
  confidence?: number;
  summary: string;
}

/** Structures a chain of reasoning into numbered steps. */
export function structureThought(input: ThinkInput): ThinkOutput {
  const steps = splitPoints(input.thought).map((text, index) => ({ step: index + 1, text }));
  const conclusion = steps.at(-1)?.text ?? '';
  return {
    topic: clean(input.topic),
    reasoning: input.thought.trim(),
    steps,
    conclusion,
    ...(input.confidence === undefined ? {} : { confidence: input.confidence }),
    summary: `${plural(steps.length, 'step')}; conclusion: ${conclusion}`,
  };
}

/** `think`: structured step-by-step reasoning. */
export const thinkTool: Tool<ThinkInput, ThinkOutput> = tool({
  description:
    'Think a problem through step by step before answering. Pass the topic and your reasoning; the tool ' +
    'returns it as numbered steps with the conclusion, so the reasoning stays visible and checkable.',
  inputSchema: thinkInput,
  execute: async (input): Promise<ThinkOutput> => structureThought(input),
});

// reflect --------------------------------------------------------------------------------------

const reflectInput = z.object({
  topic: topicField('What is being reflected on: the question, the work so far, or a result'),
  reflection: z
    .string()
    .trim()
    .min(1)
    .describe(
      'Your reflection: what was learned, what is uncertain, what to do differently. One point per sentence ' +
        'or line; write open questions as questions',
    ),
});

/** Input of `reflect`. */
export type ReflectInput = z.infer<typeof reflectInput>;

/** Output of `reflect`: insights separated from the questions that remain open. */
export interface ReflectOutput {
  topic: string;
  insights: string[];
  openQuestions: string[];
  summary: string;
}

/** Separates a reflection into insights and open questions. */
export function structureReflection(input: ReflectInput): ReflectOutput {
  const points = unique(splitPoints(input.reflection));
  const openQuestions = points.filter((point) => point.endsWith('?'));
  const insights = points.filter((point) => !point.endsWith('?'));
  return {
    topic: clean(input.topic),
    insights,
    openQuestions,
    summary:
      `${plural(insights.length, 'insight')}, ${plural(openQuestions.length, 'open question')}` +
      (insights[0] === undefined ? '' : `; first insight: ${insights[0]}`),
  };
}

/** `reflect`: retrospective analysis of the work so far. */
export const reflectTool: Tool<ReflectInput, ReflectOutput> = tool({
  description:
    'Reflect on the reasoning or results so far: what was learned, what remains uncertain, what to check next. ' +
    'The tool separates insights from open questions.',
  inputSchema: reflectInput,
  execute: async (input): Promise<ReflectOutput> => structureReflection(input),
});

// critique -------------------------------------------------------------------------------------

const critiqueInput = z.object({
  subject: topicField('What is being critiqued: an argument, a claim, a plan, a piece of writing'),
  analysis: z
    .string()
    .trim()
    .min(1)
    .describe(
      'Your critical analysis, one point per sentence or line. Prefix points with "Strength:", "Weakness:" or ' +
        '"Suggestion:" to classify them; unprefixed points are classified by their wording',
    ),
});

/** Input of `critique`. */
export type CritiqueInput = z.infer<typeof critiqueInput>;

/** Output of `critique`. */
export interface CritiqueOutput {
  subject: string;
  strengths: string[];
  weaknesses: string[];
  suggestions: string[];
  summary: string;
}

const STRENGTH_LABELS = new Set(['strength', 'strengths', 'pro', 'pros', 'plus', 'merit', 'good']);
const WEAKNESS_LABELS = new Set(['weakness', 'weaknesses', 'con', 'cons', 'minus', 'flaw', 'concern', 'risk', 'issue']);
const SUGGESTION_LABELS = new Set(['suggestion', 'suggestions', 'improvement', 'recommendation', 'fix', 'next step']);
// Wording that marks an unlabelled point as a weakness or a suggestion; everything else is a strength.
const WEAKNESS_WORDS =
  /\b(however|but|weak|flaw|flawed|lacks?|lacking|fails?|risk|risks|problem|overlooks?|ignores?|limited|bias|biased|unclear|unsupported|concern|cannot|doubt|doubtful|overstate[sd]?|assumes?)\b/i;
const SUGGESTION_WORDS =
  /^(should|consider|add|try|use|include|clarify|provide|measure)\b|\b(should|could be improved)\b/i;

/** Sorts a critical analysis into strengths, weaknesses and suggestions. */
export function structureCritique(input: CritiqueInput): CritiqueOutput {
  const result: CritiqueOutput = {
    subject: clean(input.subject),
    strengths: [],
    weaknesses: [],
    suggestions: [],
    summary: '',
  };
  for (const point of unique(splitPoints(input.analysis))) {
    const { label, body } = labelled(point);
    const key = label?.toLowerCase();
    if (key !== undefined && STRENGTH_LABELS.has(key)) result.strengths.push(body);
    else if (key !== undefined && WEAKNESS_LABELS.has(key)) result.weaknesses.push(body);
    else if (key !== undefined && SUGGESTION_LABELS.has(key)) result.suggestions.push(body);
    else if (SUGGESTION_WORDS.test(point)) result.suggestions.push(point);
    else if (WEAKNESS_WORDS.test(point)) result.weaknesses.push(point);
    else result.strengths.push(point);
  }
  result.summary =
    `"${result.subject}": ${plural(result.strengths.length, 'strength')}, ` +
    `${plural(result.weaknesses.length, 'weakness', 'weaknesses')}, ${plural(result.suggestions.length, 'suggestion')}`;
  return result;
}

/** `critique`: critical evaluation of an argument, claim or work. */
export const critiqueTool: Tool<CritiqueInput, CritiqueOutput> = tool({
  description:
    'Critically evaluate an argument, claim, plan or piece of work. Pass the subject and your analysis; the tool ' +
    'sorts it into strengths, weaknesses and suggestions.',
  inputSchema: critiqueInput,
  execute: async (input): Promise<CritiqueOutput> => structureCritique(input),
});

// debate ---------------------------------------------------------------------------------------

const debateInput = z.object({
  topic: topicField('The contested question, e.g. "Will cryptocurrencies replace banks?"'),
  perspectives: z
    .array(z.string().trim().min(1))
    .optional()
    .describe('One entry per position, written "Side: argument", e.g. "Supporters: payments get cheaper"'),
  synthesis: z.string().trim().min(1).optional().describe('Where the positions agree, or the most balanced view'),
});

/** Input of `debate`. */
export type DebateInput = z.infer<typeof debateInput>;

/** Output of `debate`. */
export interface DebateOutput {
  topic: string;
  positions: { side: string; argument: string }[];
  synthesis?: string;
  summary: string;
}

/**
 * Lays out the positions of a debate. Without perspectives it returns the frame of one: a case
 * for and a case against, for the model to argue in its answer.
 */
export function structureDebate(input: DebateInput): DebateOutput {
  const topic = clean(input.topic);
  const given = unique(input.perspectives ?? []).map((perspective, index) => {
    const { label, body } = labelled(perspective);
    return { side: label ?? `Position ${index + 1}`, argument: body };
  });
  const positions =
    given.length > 0
      ? given
      : [
          { side: 'For', argument: `Arguments that support: ${topic}` },
          { side: 'Against', argument: `Arguments that oppose: ${topic}` },
        ];
  return {
    topic,
    positions,
    ...(input.synthesis === undefined ? {} : { synthesis: clean(input.synthesis) }),
    summary: `${plural(positions.length, 'position')} on "${topic}": ${positions.map((p) => p.side).join(' vs ')}`,
  };
}

/** `debate`: multi-perspective analysis of a contested question. */
export const debateTool: Tool<DebateInput, DebateOutput> = tool({
  description:
    'Explore a contested question from several perspectives. Pass the topic and one argument per side ' +
    '("Side: argument"); the tool returns the positions side by side, plus your synthesis.',
  inputSchema: debateInput,
  execute: async (input): Promise<DebateOutput> => structureDebate(input),
});

// brainstorm -----------------------------------------------------------------------------------

const brainstormInput = z.object({
  challenge: topicField('The problem or goal to generate ideas for'),
  ideas: z
    .array(z.string().trim().min(1))
    .min(1)
    .describe('The ideas, one per entry; prefix with a category to group them, e.g. "Process: weigh waste daily"'),
});

/** Input of `brainstorm`. */
export type BrainstormInput = z.infer<typeof brainstormInput>;

/** Output of `brainstorm`. */
export interface BrainstormOutput {
  challenge: string;
  ideas: { id: number; idea: string; category: string }[];
  /** Category names in order of first appearance. */
  categories: string[];
  summary: string;
}

/** Numbers, de-duplicates and groups a list of ideas. */
export function structureBrainstorm(input: BrainstormInput): BrainstormOutput {
  const ideas = unique(input.ideas.map(clean)).map((entry, index) => {
    const { label, body } = labelled(entry);
    return { id: index + 1, idea: body, category: label ?? 'General' };
  });
  const categories = unique(ideas.map((idea) => idea.category));
  return {
    challenge: clean(input.challenge),
    ideas,
    categories,
    summary: `${plural(ideas.length, 'idea')} in ${plural(categories.length, 'category', 'categories')}`,
  };
}

/** `brainstorm`: divergent idea generation. */
export const brainstormTool: Tool<BrainstormInput, BrainstormOutput> = tool({
  description:
    'Generate many ideas for a challenge before judging them. Pass the challenge and your ideas; the tool numbers ' +
    'them, removes repeats and groups them by category.',
  inputSchema: brainstormInput,
  execute: async (input): Promise<BrainstormOutput> => structureBrainstorm(input),
});

// compare --------------------------------------------------------------------------------------

const compareInput = z.object({
  items: z
    .array(z.string().trim().min(1))
    .min(2)
    .describe('The options to compare, written "Name: description", e.g. "Solar: cheap per kWh, works on most roofs"'),
  criteria: z
    .array(z.string().trim().min(1))
    .optional()
    .describe('What to compare them on, e.g. ["cost", "reliability"]; default: cost, benefits, drawbacks'),
  topic: z.string().trim().min(1).optional().describe('What the comparison is for, in one line'),
});

/** Input of `compare`. */
export type CompareInput = z.infer<typeof compareInput>;

/** Output of `compare`: a table with one row per criterion and one column per item. */
export interface CompareOutput {
  topic: string;
  items: { name: string; description: string }[];
  criteria: string[];
  table: { columns: string[]; rows: string[][] };
  summary: string;
}

const DEFAULT_CRITERIA = ['cost', 'benefits', 'drawbacks'] as const;
const NOT_STATED = '—';

/**
 * Builds a comparison table. A cell holds the clause of the item's description that mentions
 * the criterion, or "—" when the description says nothing about it, so gaps are visible.
 */
export function structureComparison(input: CompareInput): CompareOutput {
  const items = unique(input.items).map((entry) => {
    const { label, body } = labelled(entry);
    return label === undefined ? { name: body, description: '' } : { name: label, description: body };
  });
  const criteria = unique((input.criteria ?? DEFAULT_CRITERIA).map(clean));
  const rows = criteria.map((criterion) => [
    criterion,
    ...items.map((item) => clauseAbout(item.description, criterion) ?? NOT_STATED),
  ]);
  const topic = clean(input.topic ?? items.map((item) => item.name).join(' vs '));
  return {
    topic,
    items,
    criteria,
    table: { columns: ['Criterion', ...items.map((item) => item.name)], rows },
    summary: `${items.map((item) => item.name).join(' vs ')} on ${plural(criteria.length, 'criterion', 'criteria')}`,
  };
}

/**
 * The first clause of `text` that mentions `criterion`. Words are compared by their first five
 * letters, a crude stemmer, so "costs" and "costly" count for "cost" and "reliable" for "reliability".
 */
function clauseAbout(text: string, criterion: string): string | undefined {
  const stems = criterion
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 2)
    .map((word) => word.slice(0, 5));
  if (stems.length === 0) return undefined;
  const clauses = text
    .split(/[;,.]\s*/)
    .map(clean)
    .filter((clause) => clause !== '');
  return clauses.find((clause) => {
    const words = clause.toLowerCase().split(/[^\p{L}\p{N}]+/u);
    return stems.some((stem) => words.some((word) => word.startsWith(stem)));
  });
}

/** `compare`: systematic comparison of options on criteria. */
export const compareTool: Tool<CompareInput, CompareOutput> = tool({
  description:
    'Compare two or more options on explicit criteria. Pass the items ("Name: description") and the criteria; ' +
    'the tool returns a table with one row per criterion, marking what the descriptions do not cover.',
  inputSchema: compareInput,
  execute: async (input): Promise<CompareOutput> => structureComparison(input),
});

/** The six cognitive tools by name. */
export const cognitiveTools = {
  think: thinkTool,
  reflect: reflectTool,
  critique: critiqueTool,
  debate: debateTool,
  brainstorm: brainstormTool,
  compare: compareTool,
} as const;
