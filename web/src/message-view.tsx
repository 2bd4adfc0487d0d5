/**
 * One chat message: its text, reasoning and tool calls in the order they streamed.
 */
import { getToolName, isToolUIPart } from 'ai';
import { Markdown } from './markdown.js';
import { type AnswerApproval, ToolCard } from './tool-card.js';
import type { InspectorMessage } from './types.js';

/**
 * A message of the transcript; `live` while it is the answer still streaming. `onAnswer`
 * answers the approval requests of its tool calls.
 */
export function MessageView({
  message,
  live,
  onAnswer,
}: {
  message: InspectorMessage;
  live: boolean;
  onAnswer?: AnswerApproval | undefined;
}) {
  const who = message.role === 'user' ? 'You' : message.role === 'assistant' ? 'Agent' : 'System';
  return (
    <article className={`message message-${message.role}`} data-testid={`message-${message.role}`}>
      <div className="message-role">{who}</div>
      <div className="message-parts">
        {message.parts.map((part, index) => {
          // Parts have no ids of their own; their order within a message never changes.
          const key = `${message.id}:${index}`;
          if (part.type === 'text') {
            // The user's words as typed; the agent's answer as the Markdown it is written in.
            return message.role === 'assistant' ? (
              <div key={key} className="message-text message-markdown" data-testid="message-text">
                <Markdown text={part.text} live={live} />
              </div>
            ) : (
              <p key={key} className="message-text" data-testid="message-text">
                {part.text}
              </p>
            );
          }
          if (part.type === 'reasoning') {
            return (
              <details key={key} className="reasoning">
                <summary>Reasoning</summary>
                <p className="message-text">{part.text}</p>
              </details>
            );
          }
          if (isToolUIPart(part)) {
            return <ToolCard key={key} name={getToolName(part)} part={part} live={live} onAnswer={onAnswer} />;
          }
          // data-orchestration parts feed the orchestration panel; step markers show nothing.
          return null;
        })}
      </div>
    </article>
  );
}
