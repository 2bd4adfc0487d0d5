/**
 * Session controls: the current session id, new session, reset, delete, and resuming a
 * session by its id (for example one started from another tab or by `baton chat`).
 */
import { type FormEvent, useState } from 'react';

/** Props of {@link SessionControls}. */
export interface SessionControlsProps {
  sessionId: string | null;
  busy: boolean;
  onNew: () => void;
  onReset: () => Promise<void>;
  onDelete: () => Promise<void>;
  onResume: (sessionId: string) => Promise<boolean>;
  onShowTemplate: () => void;
}

/** The session bar under the header. */
export function SessionControls({
  sessionId,
  busy,
  onNew,
  onReset,
  onDelete,
  onResume,
  onShowTemplate,
}: SessionControlsProps) {
  const [resumeId, setResumeId] = useState('');

  const submitResume = async (event: FormEvent) => {
    event.preventDefault();
    if (await onResume(resumeId)) setResumeId('');
  };

  return (
    <div className="session-controls">
      <div className="session-id">
        <span className="field-label">Session</span>
        {sessionId ? (
          <code className="session-value" data-testid="session-id" title={sessionId}>
            {sessionId}
          </code>
        ) : (
          <span
            className="session-value muted"
            data-testid="session-id-none"
            title="The server issues its id with the first answer"
          >
            not started yet
          </span>
        )}
      </div>
      <div className="button-row">
        <button type="button" onClick={onNew} disabled={busy} title="Start an empty conversation with a new session">
          New session
        </button>
        <button
          type="button"
          onClick={() => void onReset()}
          disabled={!sessionId || busy}
          title="Reset the orchestration state of this session (step, sequence, tool history; token usage is kept); the transcript stays"
        >
          Reset
        </button>
        <button
          type="button"
          onClick={() => void onDelete()}
          disabled={!sessionId || busy}
          title="Delete this session on the server and start a new one"
        >
          Delete
        </button>
        <button type="button" onClick={onShowTemplate} title="Show the agent template and its validation issues">
          Template
        </button>
      </div>
      <form className="resume" onSubmit={(event) => void submitResume(event)}>
        <label className="field">
          <span className="visually-hidden">Resume session</span>
          <input
            type="text"
            value={resumeId}
            onChange={(event) => setResumeId(event.target.value)}
            placeholder="session id"
            spellCheck={false}
            autoComplete="off"
          />
        </label>
        <button type="submit" disabled={!resumeId.trim() || busy}>
          Resume
        </button>
      </form>
    </div>
  );
}
