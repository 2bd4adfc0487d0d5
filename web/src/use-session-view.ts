/**
 * The session view (`GET /api/sessions/:id`): every tool allowed or blocked with its reason.
 * Only the newest answer becomes the view, so a slow response never overwrites a newer one; but
 * every answer's per-tool explanation is kept by the state it describes ({@link stateKey}), so
 * the tools panel can give the reasons of whichever snapshot the page shows.
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import { type ApiError, getSession, toApiError } from './api.js';
import { stateKey } from './live-tools.js';
import type { SessionResponse, ToolStatus } from './types.js';

/** How many explained states to keep (a turn has one per model step). */
const KEPT = 32;

/** What {@link useSessionView} returns. */
export interface SessionView {
  view: SessionResponse | null;
  /** The server's per-tool explanations, by {@link stateKey} of the state they explain. */
  explained: ReadonlyMap<string, ToolStatus[]>;
  /** Sets the view directly (from a reset or resume answer). */
  setView: (view: SessionResponse) => void;
  /** Fetches now; resolves to the view, or null when it failed (the error is reported) or was overtaken. */
  refresh: (sessionId: string) => Promise<SessionResponse | null>;
  /** Forgets the view and the explanations, and ignores answers still on their way. */
  clear: () => void;
}

/** Keeps the session view of the inspector, reporting failures to `onError`. */
export function useSessionView(
  onError: (error: ApiError) => void,
  onView: (view: SessionResponse) => void,
  stateToken: () => string | undefined,
): SessionView {
  const [view, setViewState] = useState<SessionResponse | null>(null);
  const [explained, setExplained] = useState<ReadonlyMap<string, ToolStatus[]>>(new Map());
  const latest = useRef(0);
  // Bumped by clear(): answers to requests made before it belong to a forgotten session.
  const era = useRef(0);
  const mounted = useRef(true);
  const callbacks = useRef({ onError, onView, stateToken });
  callbacks.current = { onError, onView, stateToken };

  const remember = useCallback((next: SessionResponse) => {
    const key = stateKey(next.state);
    setExplained((current) => {
      const updated = new Map(current);
      updated.delete(key);
      updated.set(key, next.tools);
      while (updated.size > KEPT) updated.delete(updated.keys().next().value as string);
      return updated;
    });
  }, []);

  const setView = useCallback(
    (next: SessionResponse) => {
      latest.current++;
      setViewState(next);
      remember(next);
    },
    [remember],
  );

  const refresh = useCallback(
    async (sessionId: string) => {
      const ticket = ++latest.current;
      const asked = era.current;
      try {
        const next = await getSession(sessionId, callbacks.current.stateToken());
        if (!mounted.current || asked !== era.current) return null;
        remember(next);
        if (ticket !== latest.current) return null;
        setViewState(next);
        callbacks.current.onView(next);
        return next;
      } catch (error) {
        if (mounted.current && ticket === latest.current && asked === era.current) {
          callbacks.current.onError(toApiError(error));
        }
        return null;
      }
    },
    [remember],
  );

  const clear = useCallback(() => {
    era.current++;
    latest.current++;
    setViewState(null);
    setExplained(new Map());
  }, []);

  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);

  return { view, explained, setView, refresh, clear };
}
