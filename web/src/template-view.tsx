/**
 * The agent's template as the server loaded it, with its validation issues, in a modal
 * dialog (native `<dialog>`: focus stays inside, Escape closes it).
 */
import { useEffect, useRef } from 'react';
import type { AgentDetailResponse } from './types.js';

/** The template dialog; `open` drives it, `onClose` is called however it was closed. */
export function TemplateView({
  agent,
  open,
  onClose,
}: {
  agent: AgentDetailResponse | null;
  open: boolean;
  onClose: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);

  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (open && !element.open) element.showModal();
    if (!open && element.open) element.close();
  }, [open]);

  return (
    <dialog ref={dialog} className="template-view" onClose={onClose} aria-labelledby="template-title">
      <header className="dialog-header">
        <h2 id="template-title">Template {agent ? <code>{agent.id}</code> : null}</h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </header>
      {!agent ? (
        <p className="muted">Loading the template…</p>
      ) : (
        <>
          <section aria-labelledby="issues-title">
            <h3 id="issues-title">Validation issues</h3>
            {agent.issues.length === 0 ? (
              <p className="muted" data-testid="template-no-issues">
                No issues: the template is valid and every step can become active.
              </p>
            ) : (
              <ul className="issues" data-testid="template-issues">
                {agent.issues.map((issue) => (
                  <li key={`${issue.path}:${issue.code}:${issue.message}`} className={`issue issue-${issue.severity}`}>
                    <span className={`badge badge-${issue.severity === 'error' ? 'blocked' : 'warn'}`}>
                      {issue.severity}
                    </span>{' '}
                    <code>{issue.path || '(document)'}</code>: {issue.message}{' '}
                    <span className="muted">[{issue.code}]</span>
                    {issue.hint && <div className="muted">hint: {issue.hint}</div>}
                  </li>
                ))}
              </ul>
            )}
          </section>
          <section aria-labelledby="json-title">
            <h3 id="json-title">JSON</h3>
            <pre className="json" data-testid="template-json">
              {JSON.stringify(agent.template, null, 2)}
            </pre>
          </section>
        </>
      )}
    </dialog>
  );
}
