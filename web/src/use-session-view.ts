/**
 * The session view (`GET /api/sessions/:id`): every tool allowed or blocked with its reason.
 * Refreshed on demand, debounced while an answer streams, and only the newest answer is kept,
 * so a slow response never overwrites a newer one.
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import { type ApiError, getSession, toApiError } from './api.js';
import type { SessionResponse } from './types.js';

/** How long to wait for more orchestration parts before asking the server again. */
const DEBOUNCE_MS = 120;

/** What {@link useSessionView} returns. */
export interface SessionView {
  view: SessionResponse | null;
  /** Sets the view directly (from a reset or resume answer). */
  setView: (view: SessionResponse | null) => void;
  /** Fetches now; resolves to the view, or null when it failed (the error is reported). */
  refresh: (sessionId: string) => Promise<SessionResponse | null>;
  /** Fetches after a short pause; calls within the pause coalesce into one request. */
  refreshSoon: (sessionId: string) => void;
  /** Forgets the view and cancels pending requests. */
  clear: () => void;
}

/** Keeps the session view of the inspector, reporting failures to `onError`. */
export function useSessionView(
  onError: (error: ApiError) => void,
  onView: (view: SessionResponse) => void,
  stateToken: () => string | undefined,
): SessionView {
  const [view, setView] = useState<SessionResponse | null>(null);
  const latest = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const callbacks = useRef({ onError, onView, stateToken });
  callbacks.current = { onError, onView, stateToken };

  const refresh = useCallback(async (sessionId: string) => {
    clearTimeout(timer.current);
    const ticket = ++latest.current;
    try {
      const next = await getSession(sessionId, callbacks.current.stateToken());
      if (ticket !== latest.current) return null;
      setView(next);
      callbacks.current.onView(next);
      return next;
    } catch (error) {
      if (ticket === latest.current) callbacks.current.onError(toApiError(error));
      return null;
    }
  }, []);

  const refreshSoon = useCallback(
    (sessionId: string) => {
      clearTimeout(timer.current);
      timer.current = setTimeout(() => void refresh(sessionId), DEBOUNCE_MS);
    },
    [refresh],
  );

  const clear = useCallback(() => {
    clearTimeout(timer.current);
    latest.current++;
    setView(null);
  }, []);

  useEffect(() => () => clearTimeout(timer.current), []);

  return { view, setView, refresh, refreshSoon, clear };
}
