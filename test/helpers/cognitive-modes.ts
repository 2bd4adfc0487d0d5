/**
 * User messages for examples/agents/cognitive-reasoner.json, each with the mode it selects and the
 * tools of that mode's sequence, as the offline model calls them: shared by the tests that drive
 * real servers through whole turns.
 */

/** User messages and the mode, and so the tool sequence, each one selects. */
export const COGNITIVE_MODES = [
  {
    text: 'How many electric vehicles will be on the road by 2030?',
    step: 'ResearchMode',
    tools: ['search', 'think', 'reflect'],
  },
  {
    text: 'How can we solve traffic jams in cities?',
    step: 'ProblemSolvingMode',
    tools: ['think', 'brainstorm', 'compare'],
  },
  {
    text: 'Please critique my plan to learn Rust in a week.',
    step: 'EvaluationMode',
    tools: ['critique', 'debate', 'reflect'],
  },
  { text: 'Compare trains versus planes for Europe.', step: 'ComparisonMode', tools: ['search', 'compare', 'reflect'] },
  {
    text: 'Give me some ideas for a birthday party.',
    step: 'IdeationMode',
    tools: ['think', 'brainstorm', 'critique'],
  },
  { text: 'Should we debate whether remote work helps?', step: 'DebateMode', tools: ['search', 'debate', 'reflect'] },
] as const;
