/**
 * The session timeline's data: the session's logged decisions (`GET /api/sessions/:id/events`),
 * fetched incrementally (only the entries after the newest one held) and kept within the
 * server's window: entries the server's bounded log has dropped are dropped here too, so the
 * page shows what the server still knows and says how much is gone.
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import { getSessionEvents, toApiError } from './api.js';
import type { SessionEventEntry } from './types.js';

/** Entries asked for per request: the API's largest page, so one request usually brings all. */
const PAGE = 500;

/** What the timeline shows. */
export interface SessionTimelineData {
  /** Oldest first. */
  entries: SessionEventEntry[];
  /** Entries the server's bounded log has dropped so far (seqs 1 to `dropped`). */
  dropped: number;
  /** Most entries the server keeps per session. */
  capacity: number;
  /** True once the server answered for this session. */
  loaded: boolean;
  /** The server keeps no event log (stateless, or none configured): its own explanation. */
  unavailable: string | null;
  /** The last request failed (other than `unavailable`): what went wrong. */
  error: string | null;
}

/** What {@link useSessionTimeline} returns. */
export interface SessionTimeline extends SessionTimelineData {
  /** The entry the user selected to see the session at that point, or null. */
  selected: SessionEventEntry | null;
  /** Selects an entry by seq (null: none). */
  select: (seq: number | null) => void;
  /** Fetches the entries logged since the last fetch (requests run one after another). */
  refresh: (sessionId: string) => Promise<void>;
  /** Forgets the session's entries and ignores answers still on their way. */
  clear: () => void;
}

const EMPTY: SessionTimelineData = {
  entries: [],
  dropped: 0,
  capacity: 0,
  loaded: false,
  unavailable: null,
  error: null,
};

/** Keeps the session timeline of the inspector; `stateToken` is read at each request. */
export function useSessionTimeline(stateToken: () => string | undefined): SessionTimeline {
  const [data, setData] = useState<SessionTimelineData>(EMPTY);
  const [selectedSeq, setSelectedSeq] = useState<number | null>(null);
  // Requests run one after another, so that each starts after the entries the last one brought.
  const queue = useRef<Promise<void>>(Promise.resolve());
  const held = useRef<{ entries: SessionEventEntry[]; after: number }>({ entries: [], after: 0 });
  // Bumped by clear(): answers to requests made before it belong to a forgotten session.
  const era = useRef(0);
  // The server keeps no log for any session (it is stateless, or has none): asked once per
  // page, so that every turn's end does not log another failed request in the console.
  const unavailable = useRef<string | null>(null);
  const mounted = useRef(true);
  const token = useRef(stateToken);
  token.current = stateToken;

  const load = useCallback(async (sessionId: string, asked: number) => {
    if (asked !== era.current || !mounted.current) return;
    if (unavailable.current !== null) {
      setData({ ...EMPTY, loaded: true, unavailable: unavailable.current });
      return;
    }
    let { entries, after } = held.current;
    try {
      for (;;) {
        const page = await getSessionEvents(sessionId, after, PAGE, token.current());
        if (asked !== era.current || !mounted.current) return;
        // Only what the server still keeps: its window starts after the dropped entries.
        entries = [...entries, ...page.events].filter((entry) => entry.seq > page.dropped);
        after = page.nextAfter;
        held.current = { entries, after };
        setData({
          entries,
          dropped: page.dropped,
          capacity: page.capacity,
          loaded: true,
          unavailable: null,
          error: null,
        });
        if (page.events.length < PAGE) return;
      }
    } catch (error) {
      if (asked !== era.current || !mounted.current) return;
      const problem = toApiError(error);
      if (problem.code === 'not-available') {
        unavailable.current = problem.message;
        setData({ ...EMPTY, loaded: true, unavailable: problem.message });
      } else {
        setData((current) => ({ ...current, error: `${problem.code}: ${problem.message}` }));
      }
    }
  }, []);

  const refresh = useCallback(
    (sessionId: string) => {
      const asked = era.current;
      const next = queue.current.then(() => load(sessionId, asked));
      queue.current = next;
      return next;
    },
    [load],
  );

  const clear = useCallback(() => {
    era.current++;
    held.current = { entries: [], after: 0 };
    setData(EMPTY);
    setSelectedSeq(null);
  }, []);

  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);

  // A selected entry the server has since dropped is no longer selected.
  const selected = selectedSeq === null ? null : (data.entries.find((entry) => entry.seq === selectedSeq) ?? null);
  return { ...data, selected, select: setSelectedSeq, refresh, clear };
}
