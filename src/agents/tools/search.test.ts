import { generateText, isStepCount } from 'ai';
import { describe, expect, it } from 'vitest';
import { createOfflineModel } from '../../ai-sdk/offline-model.js';
import { splitSentences } from './cognitive.js';
import { type CorpusDocument, corpus } from './corpus.js';
import { createSearchIndex, createSearchTool, DEFAULT_SEARCH_LIMIT, type SearchOutput } from './search.js';

const search = createSearchIndex();
const titles = (output: SearchOutput) => output.results.map((r) => r.title);

describe('the bundled corpus', () => {
  it('has 30 to 60 short documents with unique ids', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(30);
    expect(corpus.length).toBeLessThanOrEqual(60);
    expect(new Set(corpus.map((d) => d.id)).size).toBe(corpus.length);
    for (const document of corpus) {
      const sentences = splitSentences(document.text).length;
      expect(sentences, document.id).toBeGreaterThanOrEqual(2);
      expect(sentences, document.id).toBeLessThanOrEqual(5);
      expect(document.source).toBe(`baton-corpus/${document.id}`);
    }
  });

  it('answers every chat prompt of the cognitive reasoner with a document on its topic', () => {
    const expected: Record<string, string> = {
      'How many electric vehicles will be on the road by 2030?': 'ev-2030-projections',
      'Compare solar and wind energy for residential power generation': 'solar-vs-wind-homes',
      'Critique the argument that remote work improves productivity': 'hybrid-work-evidence',
      'Brainstorm innovative ways to reduce food waste in restaurants': 'restaurant-food-waste-solutions',
      'Debate whether cryptocurrencies will eventually replace traditional banking': 'crypto-vs-banking',
      'How can cities solve traffic congestion problems?': 'induced-demand',
    };
    for (const [query, id] of Object.entries(expected)) {
      expect(search({ query }).results[0]?.source, query).toBe(`baton-corpus/${id}`);
    }
  });
});

describe('search', () => {
  it('ranks by relevance and returns a title, the best matching sentence, a source and a score', () => {
    const output = search({ query: 'How many electric vehicles will be on the road by 2030?' });
    expect(output.query).toBe('How many electric vehicles will be on the road by 2030?');
    expect(output.results).toHaveLength(DEFAULT_SEARCH_LIMIT);
    expect(output.results[0]).toEqual({
      title: 'How many electric vehicles by 2030? Projections',
      snippet:
        'Outlooks based on policies already announced put the global electric car fleet at roughly 240 to 250 million by 2030, and more ambitious climate scenarios at well over 300 million.',
      source: 'baton-corpus/ev-2030-projections',
      score: expect.any(Number),
    });
    const scores = output.results.map((r) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });

  it('matches misspellings (fuzzy) and word beginnings (prefix)', () => {
    expect(titles(search({ query: 'who discovered penicilin' }))[0]).toBe('Penicillin and antibiotic resistance');
    expect(titles(search({ query: 'photosynth' }))[0]).toBe('Photosynthesis');
  });

  it('weighs titles more than body text', () => {
    const documents: CorpusDocument[] = [
      { id: 'a', title: 'Ocean tides', text: 'Tides follow the moon. They rise twice a day.', source: 'a' },
      { id: 'b', title: 'The moon', text: 'It orbits the Earth. It raises ocean tides.', source: 'b' },
    ];
    const local = createSearchIndex(documents);
    expect(titles(local({ query: 'moon' }))).toEqual(['The moon', 'Ocean tides']);
    expect(titles(local({ query: 'tides' }))).toEqual(['Ocean tides', 'The moon']);
  });

  it('returns an empty result list, not an error, when nothing matches', () => {
    expect(search({ query: 'zzyzx qwxv' })).toEqual({ query: 'zzyzx qwxv', results: [] });
    // Only stop words: nothing to look for.
    expect(search({ query: 'what is the' }).results).toEqual([]);
  });

  it('respects the limit and keeps it between 1 and 10', () => {
    expect(search({ query: 'energy', limit: 2 }).results).toHaveLength(2);
    expect(search({ query: 'energy', limit: 0 }).results).toHaveLength(1);
    expect(search({ query: 'the history of energy and medicine', limit: 50 }).results).toHaveLength(10);
  });

  it('is deterministic', () => {
    const again = createSearchIndex();
    for (const query of ['traffic', 'sleep and health', 'renewable storage batteries']) {
      expect(again({ query })).toEqual(search({ query }));
    }
  });

  it('refuses a corpus with duplicate ids, naming the id', () => {
    const document: CorpusDocument = { id: 'x', title: 't', text: 'One. Two.', source: 's' };
    expect(() => createSearchIndex([document, document])).toThrow('duplicate document id "x"');
  });
});

describe('the search tool in the AI SDK', () => {
  it('is called with a query and returns its results to the model', async () => {
    const result = await generateText({
      model: createOfflineModel({ maxToolCalls: 1 }),
      tools: { search: createSearchTool() },
      prompt: 'Find what is known about congestion pricing',
      stopWhen: isStepCount(3),
    });
    const output = result.steps[0]?.toolResults[0]?.output as SearchOutput | undefined;
    expect(output?.query).toBe('Find what is known about congestion pricing');
    expect(output?.results[0]?.title).toBe('Congestion pricing');
    expect(result.text).toContain('**In short:** Congestion pricing charges drivers');
  });

  it('searches the documents it was created with', async () => {
    const tool = createSearchTool([
      { id: 'only', title: 'Baton', text: 'Baton orchestrates agents. It enforces sequences.', source: 'readme' },
    ]);
    const output = await tool.execute?.({ query: 'sequences' }, { toolCallId: 't', messages: [], context: {} });
    expect(output).toEqual({
      query: 'sequences',
      results: [{ title: 'Baton', snippet: 'It enforces sequences.', source: 'readme', score: expect.any(Number) }],
    });
  });
});
