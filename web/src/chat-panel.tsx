/**
 * The conversation: transcript (following the newest message while it streams), example
 * prompts from the template's `chatSettings`, and the composer.
 */
import { useRef } from 'react';
import { Composer } from './composer.js';
import { MessageView } from './message-view.js';
import type { AnswerApproval } from './tool-card.js';
import type { AgentDetailResponse, InspectorMessage } from './types.js';
import { useFollowChat } from './use-follow-chat.js';

function stringsAt(record: Record<string, unknown> | undefined, key: string): string[] {
  const value = record?.[key];
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

/** The template's `chatSettings.chatPrompts` and `initialMessages`, when it has them. */
export function chatSettings(agent: AgentDetailResponse | null): { prompts: string[]; greeting: string[] } {
  const settings = agent?.template.chatSettings;
  const record = typeof settings === 'object' && settings !== null ? (settings as Record<string, unknown>) : undefined;
  return { prompts: stringsAt(record, 'chatPrompts'), greeting: stringsAt(record, 'initialMessages') };
}

/** The chat column. */
export function ChatPanel({
  agent,
  messages,
  busy,
  onSend,
  onStop,
  onAnswer,
}: {
  agent: AgentDetailResponse | null;
  messages: InspectorMessage[];
  busy: boolean;
  onSend: (text: string) => void;
  onStop: () => void;
  /** Answers a tool call's approval request. */
  onAnswer: AnswerApproval;
}) {
  const panel = useRef<HTMLElement>(null);
  const log = useRef<HTMLDivElement>(null);
  const content = useRef<HTMLDivElement>(null);
  const { prompts, greeting } = chatSettings(agent);
  useFollowChat(panel, log, content, messages.length, messages.at(-1)?.role);

  return (
    <section id="chat-panel" className="panel chat-panel" aria-labelledby="chat-title" ref={panel}>
      <h2 id="chat-title" className="panel-title">
        Chat {agent && <span className="muted">with {agent.name}</span>}
      </h2>
      <div className="chat-log" ref={log} role="log" aria-live="polite" aria-busy={busy} data-testid="chat-log">
        <div className="chat-content" ref={content}>
          {messages.length === 0 && (
            <div className="empty-chat">
              {greeting.map((line) => (
                <p key={line}>{line}</p>
              ))}
              {agent && greeting.length === 0 && <p>{agent.description}</p>}
              {prompts.length > 0 && (
                <>
                  <p className="field-label">Try one of these</p>
                  <ul className="prompts">
                    {prompts.map((prompt) => (
                      <li key={prompt}>
                        <button type="button" className="prompt" disabled={busy} onClick={() => onSend(prompt)}>
                          {prompt}
                        </button>
                      </li>
                    ))}
                  </ul>
                </>
              )}
            </div>
          )}
          {messages.map((message, index) => (
            <MessageView
              key={message.id}
              message={message}
              live={busy && index === messages.length - 1}
              onAnswer={busy ? undefined : onAnswer}
            />
          ))}
          {busy && messages.at(-1)?.role === 'user' && <p className="muted thinking">Waiting for the agent…</p>}
        </div>
      </div>
      <Composer busy={busy} disabled={!agent} onSend={onSend} onStop={onStop} />
    </section>
  );
}
