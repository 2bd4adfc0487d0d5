/**
 * The session's recently used tools, newest first.
 */

/** How many recent tools to show; the session keeps up to its template's historyLimit. */
const SHOWN = 12;

/** Recently used tools, newest first; `testIdPrefix` keeps a second list's test ids apart. */
export function RecentTools({ tools, testIdPrefix = '' }: { tools: string[]; testIdPrefix?: string }) {
  if (tools.length === 0) return <p className="muted">No tool used in this session yet.</p>;
  const newest = tools.slice(-SHOWN).reverse();
  return (
    <div>
      <ol
        className="recent-tools"
        data-testid={`${testIdPrefix}recent-tools`}
        aria-label="Recently used tools, newest first"
      >
        {newest.map((tool, index) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: the history repeats tools; its position identifies an entry
          <li key={`${tools.length - index}:${tool}`} className="chip">
            {tool}
          </li>
        ))}
      </ol>
      {tools.length > SHOWN && <p className="muted">and {tools.length - SHOWN} earlier</p>}
    </div>
  );
}
