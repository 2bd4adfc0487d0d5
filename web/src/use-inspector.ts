/**
 * The inspector's state: the chosen agent, its session, the chat (useChat over Baton's UI
 * message stream) and the orchestration as it streams. Components only render what this returns.
 */
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, generateId, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import {
  type ApiError,
  deleteSession,
  getAgent,
  getSession,
  isStatelessServer,
  listAgents,
  resetSession,
  STATE_HEADER,
  toApiError,
} from './api.js';
import { type LiveTool, liveTools, stateKey } from './live-tools.js';
import type {
  AgentDetailResponse,
  AgentSummary,
  InspectorMessage,
  OrchestrationSnapshot,
  SessionResponse,
  TimelineEntry,
} from './types.js';
import { type SessionTimeline, useSessionTimeline } from './use-session-timeline.js';
import { useSessionView } from './use-session-view.js';

/** A problem shown to the user, with an id so it can be dismissed. */
export interface Notice {
  id: number;
  error: ApiError;
}

/** Everything the inspector's components need. */
export interface Inspector {
  agents: AgentSummary[] | null;
  agentId: string | null;
  agent: AgentDetailResponse | null;
  selectAgent: (agentId: string) => void;
  sessionId: string | null;
  /** The orchestration the page shows: the stream's latest part, or the session at rest. */
  snapshot: OrchestrationSnapshot | null;
  /** Every tool as {@link snapshot} decided it, with reasons; null before the first message. */
  tools: LiveTool[] | null;
  timeline: TimelineEntry[];
  /** Every logged decision of the session, with the state at each (from the session's event log). */
  sessionTimeline: SessionTimeline;
  messages: InspectorMessage[];
  status: 'submitted' | 'streaming' | 'ready' | 'error';
  send: (text: string) => void;
  /**
   * Answers a tool call's approval request; once every request of the answer is answered, the
   * conversation goes back to the server, which runs the approved calls (if still allowed).
   */
  answerApproval: (approvalId: string, approved: boolean) => void;
  stop: () => void;
  newSession: () => void;
  reset: () => Promise<void>;
  resume: (sessionId: string) => Promise<boolean>;
  remove: () => Promise<void>;
  /** Problems of the last action; the next action clears them. */
  notices: Notice[];
  dismiss: (id: number) => void;
}

/**
 * A chat id for a new session, as useChat makes its own (16 letters and digits, one of the
 * session ids the server accepts). Not `crypto.randomUUID()`: browsers keep it to secure
 * contexts, and an inspector reached over plain http on a LAN address is not one.
 */
function newChatId(): string {
  return generateId();
}

/** The inspector's state and actions. */
export function useInspector(): Inspector {
  const [agents, setAgents] = useState<AgentSummary[] | null>(null);
  const [agentId, setAgentId] = useState<string | null>(null);
  const [agent, setAgent] = useState<AgentDetailResponse | null>(null);
  const [sessionId, setSessionIdState] = useState<string | null>(null);
  const [snapshot, setSnapshot] = useState<OrchestrationSnapshot | null>(null);
  const [timeline, setTimeline] = useState<TimelineEntry[]>([]);
  const [notices, setNotices] = useState<Notice[]>([]);
  // The chat's id is its session (the server continues the session useChat's id names): a new
  // one, and so an empty transcript, for every agent and new session; a resumed session's own.
  const [chatId, setChatId] = useState(newChatId);

  // The transport reads these when it sends, so they live in refs as well as in state.
  const sessionIdRef = useRef<string | null>(null);
  const stateTokenRef = useRef<string | undefined>(undefined);
  // True from sending until the turn ends: the stream's snapshots are then newer than the API's.
  const streamingRef = useRef(false);
  // True once the turn's final part came (and with it a timeline refresh), until the next send.
  const finalSeenRef = useRef(false);
  // A stateless server can explain a session only with the token of its latest state, which
  // comes with a turn's final part: mid-turn it would answer 401 (no token yet, or a stale one).
  const statelessRef = useRef(false);
  const noticeIds = useRef(0);

  const report = useCallback((error: ApiError) => {
    const id = ++noticeIds.current;
    setNotices((current) => [...current.slice(-3), { id, error }]);
  }, []);
  const dismiss = useCallback((id: number) => setNotices((current) => current.filter((n) => n.id !== id)), []);
  // Every action starts afresh: an error stays on screen only until the user does something else.
  const clearNotices = useCallback(() => setNotices((current) => (current.length === 0 ? current : [])), []);

  const setSessionId = useCallback((id: string | null) => {
    sessionIdRef.current = id;
    setSessionIdState(id);
  }, []);

  const onView = useCallback((view: SessionResponse) => {
    if (!streamingRef.current) setSnapshot(view.state);
  }, []);
  const sessionView = useSessionView(report, onView, () => stateTokenRef.current);
  const sessionTimeline = useSessionTimeline(() => stateTokenRef.current);

  useEffect(() => {
    void isStatelessServer().then((stateless) => {
      statelessRef.current = stateless;
    });
    listAgents()
      .then(({ agents: list }) => {
        setAgents(list);
        setAgentId((current) => current ?? list[0]?.id ?? null);
      })
      .catch((error: unknown) => report(toApiError(error)));
  }, [report]);

  useEffect(() => {
    if (!agentId) return;
    let current = true;
    setAgent(null);
    getAgent(agentId)
      .then((detail) => {
        if (current) setAgent(detail);
      })
      .catch((error: unknown) => {
        if (current) report(toApiError(error));
      });
    return () => {
      current = false;
    };
  }, [agentId, report]);

  const transport = useMemo(
    () =>
      new DefaultChatTransport<InspectorMessage>({
        // Relative to the page, like every API URL of the inspector (see api.ts).
        api: `api/chat/${encodeURIComponent(agentId ?? '')}`,
        // useChat's own body ({ id, messages, trigger }): its id names the session.
        prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => {
          // A turn starts (a message, or the answers to approval requests, sent on their own):
          // from now on the stream's snapshots are newer than the API's.
          streamingRef.current = true;
          finalSeenRef.current = false;
          setTimeline([]);
          return { body: { ...body, id, messages, trigger, messageId } };
        },
        // A stateless server also needs the session's latest state token (from the last turn's final part).
        headers: (): Record<string, string> => {
          const token = stateTokenRef.current;
          return token ? { [STATE_HEADER]: token } : {};
        },
      }),
    [agentId],
  );

  const endTurn = useCallback(() => {
    streamingRef.current = false;
    const id = sessionIdRef.current;
    if (id) void sessionView.refresh(id);
    // A turn that ended without its final part (stopped, failed) may still have logged decisions.
    if (id && !finalSeenRef.current) void sessionTimeline.refresh(id);
  }, [sessionView.refresh, sessionTimeline.refresh]);

  const chat = useChat<InspectorMessage>({
    id: chatId,
    transport,
    // The AI SDK's human-in-the-loop flow: answering the last approval request sends the turn on.
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onData: (part) => {
      if (part.type !== 'data-orchestration') return;
      const data = part.data;
      if (data.stateToken) stateTokenRef.current = data.stateToken;
      if (data.sessionId && data.sessionId !== sessionIdRef.current) setSessionId(data.sessionId);
      setSnapshot(data);
      setTimeline((current) => [...current, { seq: current.length, snapshot: data }]);
      // A stream part carries no reasons: ask the server for the blocked tools' reasons. They
      // show when its answer explains this very state; mid-turn its store may still be a step
      // behind the stream (writes ride on the next tool call), and then the reasons wait for
      // the end of the turn.
      if (!data.final) {
        if (!statelessRef.current) void sessionView.refresh(data.sessionId);
      } else {
        // The final part comes once the turn's writes are stored: its decisions are all logged.
        finalSeenRef.current = true;
        void sessionTimeline.refresh(data.sessionId);
      }
    },
    onFinish: endTurn,
    onError: (error) => {
      report(toApiError(error));
      endTurn();
    },
  });

  const send = useCallback(
    (text: string) => {
      const trimmed = text.trim();
      if (!trimmed || !agentId) return;
      clearNotices();
      void chat.sendMessage({ text: trimmed });
    },
    [agentId, chat.sendMessage, clearNotices],
  );

  const answerApproval = useCallback(
    (approvalId: string, approved: boolean) => {
      clearNotices();
      void chat.addToolApprovalResponse({ id: approvalId, approved });
    },
    [chat.addToolApprovalResponse, clearNotices],
  );

  const forgetSession = useCallback(() => {
    streamingRef.current = false;
    stateTokenRef.current = undefined;
    setSessionId(null);
    setSnapshot(null);
    setTimeline([]);
    sessionView.clear();
    sessionTimeline.clear();
    setChatId(newChatId());
  }, [setSessionId, sessionView.clear, sessionTimeline.clear]);

  const newSession = useCallback(() => {
    clearNotices();
    forgetSession();
  }, [clearNotices, forgetSession]);

  const selectAgent = useCallback(
    (id: string) => {
      if (id === agentId) return;
      clearNotices();
      forgetSession();
      setAgentId(id);
    },
    [agentId, clearNotices, forgetSession],
  );

  const reset = useCallback(async () => {
    const id = sessionIdRef.current;
    if (!id) return;
    clearNotices();
    try {
      const { data: view, stateToken } = await resetSession(id, stateTokenRef.current);
      stateTokenRef.current = stateToken;
      sessionView.setView(view);
      setSnapshot(view.state);
      setTimeline([]);
      void sessionTimeline.refresh(id);
    } catch (error) {
      report(toApiError(error));
    }
  }, [clearNotices, report, sessionView.setView, sessionTimeline.refresh]);

  const resume = useCallback(
    async (id: string) => {
      const wanted = id.trim();
      if (!wanted) return false;
      clearNotices();
      try {
        // A stateless server cannot look a session up by id alone: it needs the state token,
        // which this page only has for its own current session.
        const token = wanted === sessionIdRef.current ? stateTokenRef.current : undefined;
        const view = await getSession(wanted, token);
        forgetSession();
        if (view.agentId !== agentId) setAgentId(view.agentId);
        stateTokenRef.current = token;
        // The next message continues this session: it is the chat's id.
        setChatId(view.sessionId);
        setSessionId(view.sessionId);
        sessionView.setView(view);
        setSnapshot(view.state);
        void sessionTimeline.refresh(view.sessionId);
        return true;
      } catch (error) {
        report(toApiError(error));
        return false;
      }
    },
    [agentId, clearNotices, forgetSession, report, setSessionId, sessionView.setView, sessionTimeline.refresh],
  );

  const remove = useCallback(async () => {
    const id = sessionIdRef.current;
    if (!id) return;
    clearNotices();
    try {
      await deleteSession(id, stateTokenRef.current);
      forgetSession();
    } catch (error) {
      report(toApiError(error));
    }
  }, [clearNotices, forgetSession, report]);

  const stop = useCallback(() => {
    clearNotices();
    void chat.stop();
  }, [clearNotices, chat.stop]);

  const tools = useMemo(
    () => liveTools(agent?.tools ?? [], snapshot, snapshot ? sessionView.explained.get(stateKey(snapshot)) : undefined),
    [agent, snapshot, sessionView.explained],
  );

  return {
    agents,
    agentId,
    agent,
    selectAgent,
    sessionId,
    snapshot,
    tools,
    timeline,
    sessionTimeline,
    messages: chat.messages,
    status: chat.status,
    send,
    answerApproval,
    stop,
    newSession,
    reset,
    resume,
    remove,
    notices,
    dismiss,
  };
}
