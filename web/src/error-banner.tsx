/**
 * The API's errors as the server sent them (code, message, path), each dismissable.
 */
import type { Notice } from './use-inspector.js';

/** Lists the current problems; renders nothing when there are none. */
export function ErrorBanner({ notices, onDismiss }: { notices: Notice[]; onDismiss: (id: number) => void }) {
  if (notices.length === 0) return null;
  return (
    <div className="notices" role="alert">
      {notices.map(({ id, error }) => (
        <div key={id} className="notice" data-testid="error-notice">
          <div className="notice-text">
            <strong>{error.code}</strong>
            {error.status > 0 && <span className="muted"> (HTTP {error.status})</span>}: {error.message}
            {error.path && (
              <span className="muted">
                {' '}
                at <code>{error.path}</code>
              </span>
            )}
          </div>
          <button type="button" className="ghost" onClick={() => onDismiss(id)} aria-label="Dismiss this error">
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
