/**
 * The built-in `search` tool: full-text search over a small bundled document set, so agents can
 * research without a network or an API key. MiniSearch gives ranking (BM25), prefix and fuzzy
 * matching; titles weigh more than body text.
 */
import { type Tool, tool } from 'ai';
import MiniSearch from 'minisearch';
import { z } from 'zod/v4';
import { splitSentences } from './cognitive.js';
import { type CorpusDocument, corpus } from './corpus.js';

/** Input of the `search` tool. */
export interface SearchInput {
  query: string;
  limit?: number | undefined;
}

/** One hit of a search. */
export interface SearchHit {
  title: string;
  /** The sentence of the document that matches the query best. */
  snippet: string;
  source: string;
  /** Relevance as computed by MiniSearch (BM25 with boosts), rounded to 3 decimals. */
  score: number;
}

/** Output of the `search` tool. No match is a normal answer with an empty `results`. */
export interface SearchOutput {
  query: string;
  results: SearchHit[];
}

/** How many results a search returns unless the caller asks for another number. */
export const DEFAULT_SEARCH_LIMIT = 5;
const MAX_SEARCH_LIMIT = 10;
const SNIPPET_LENGTH = 240;

// Question words and other function words: without this list, "How many electric vehicles will
// be on the road?" would rank documents by how often they say "will" and "the".
const STOP_WORDS = new Set(
  `a about after again all also am an and any are as at be been before being between both but by can could
  did do does doing for from had has have having he her here hers him his how i if in into is it its just me
  more most my no nor not of on once only or other our ours out over own same she should so some such than
  that the their theirs them then there these they this those through to too under until up very was we
  were what when where which while who whom why will with would you your yours`.split(/\s+/),
);

/** Lower-cases, strips accents and drops stop words; used for both documents and queries. */
function processTerm(term: string): string | null {
  const normalized = term
    .normalize('NFD')
    .replace(/\p{Diacritic}/gu, '')
    .toLowerCase();
  return normalized === '' || STOP_WORDS.has(normalized) ? null : normalized;
}

/** Searches `documents`; the same query over the same documents always gives the same answer. */
export function createSearchIndex(documents: readonly CorpusDocument[] = corpus): (input: SearchInput) => SearchOutput {
  const index = new MiniSearch<CorpusDocument>({
    fields: ['title', 'text', 'tags'],
    extractField: (document, field) => {
      const value = document[field as keyof CorpusDocument];
      return Array.isArray(value) ? value.join(' ') : value;
    },
    processTerm,
    searchOptions: { boost: { title: 2, tags: 1.5 }, prefix: true, fuzzy: 0.2, combineWith: 'OR' },
  });
  // MiniSearch rejects duplicate ids with an exception that names neither the corpus nor the
  // document, so check first and say which.
  const byId = new Map<string, CorpusDocument>();
  for (const document of documents) {
    if (byId.has(document.id)) throw new TypeError(`search corpus: duplicate document id "${document.id}"`);
    byId.set(document.id, document);
  }
  index.addAll([...documents]);

  return ({ query, limit }) => {
    const count = Math.min(Math.max(Math.trunc(limit ?? DEFAULT_SEARCH_LIMIT), 1), MAX_SEARCH_LIMIT);
    const hits = index.search(query).slice(0, count);
    return {
      query,
      results: hits.flatMap((hit) => {
        const document = byId.get(String(hit.id));
        if (document === undefined) return [];
        return [
          {
            title: document.title,
            snippet: bestSentence(document.text, hit.terms),
            source: document.source,
            score: Math.round(hit.score * 1000) / 1000,
          },
        ];
      }),
    };
  };
}

/** The sentence with the most matched terms (the first one on a tie), shortened to a snippet. */
function bestSentence(text: string, terms: readonly string[]): string {
  const sentences = splitSentences(text);
  let best = sentences[0] ?? text;
  let bestCount = -1;
  for (const sentence of sentences) {
    const words = new Set(sentence.toLowerCase().split(/[^\p{L}\p{N}]+/u));
    const count = terms.filter((term) => words.has(term)).length;
    if (count > bestCount) {
      best = sentence;
      bestCount = count;
    }
  }
  return best.length <= SNIPPET_LENGTH ? best : `${best.slice(0, SNIPPET_LENGTH - 1).trimEnd()}…`;
}

const searchInputSchema = z.object({
  query: z
    .string()
    .trim()
    .min(1)
    .describe('What to look for: keywords or a natural-language question, e.g. "electric vehicles 2030"'),
  limit: z
    .number()
    .int()
    .min(1)
    .max(MAX_SEARCH_LIMIT)
    .optional()
    .describe(`Maximum number of results (1-${MAX_SEARCH_LIMIT}, default ${DEFAULT_SEARCH_LIMIT})`),
});

/** The `search` tool over `documents` (default: the bundled corpus). */
export function createSearchTool(documents: readonly CorpusDocument[] = corpus): Tool<SearchInput, SearchOutput> {
  const search = createSearchIndex(documents);
  return tool({
    description:
      'Search a local collection of short reference documents (energy, electric vehicles, transport, work, ' +
      'food waste, finance, science, history, medicine). Returns the best matches with a title, a snippet and ' +
      'a source. Use it to gather facts before reasoning about them; an empty result list means nothing matched.',
    inputSchema: searchInputSchema,
    execute: async (input): Promise<SearchOutput> => search(input),
  });
}

/** The `search` tool over the bundled corpus. */
export const searchTool = createSearchTool();
