/**
 * The message box: Enter sends, Shift+Enter starts a new line; Stop ends a streaming answer.
 */
import { type FormEvent, type KeyboardEvent, useState } from 'react';

/** The composer under the transcript. */
export function Composer({
  busy,
  disabled,
  onSend,
  onStop,
}: {
  busy: boolean;
  disabled: boolean;
  onSend: (text: string) => void;
  onStop: () => void;
}) {
  const [text, setText] = useState('');
  const canSend = !busy && !disabled && text.trim().length > 0;

  const submit = (event?: FormEvent) => {
    event?.preventDefault();
    if (!canSend) return;
    onSend(text);
    setText('');
  };

  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    // Not while an input method composes a character: its Enter confirms the character.
    if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) {
      event.preventDefault();
      submit();
    }
  };

  return (
    <form className="composer" onSubmit={submit}>
      <label htmlFor="message" className="visually-hidden">
        Message
      </label>
      <textarea
        id="message"
        data-testid="message-input"
        rows={2}
        value={text}
        placeholder={disabled ? 'Choose an agent first' : 'Ask something (Enter sends, Shift+Enter for a new line)'}
        onChange={(event) => setText(event.target.value)}
        onKeyDown={onKeyDown}
        disabled={disabled}
      />
      {busy ? (
        <button type="button" className="primary" onClick={onStop} data-testid="stop">
          Stop
        </button>
      ) : (
        <button type="submit" className="primary" disabled={!canSend} data-testid="send">
          Send
        </button>
      )}
    </form>
  );
}
