/**
 * The inspector: header (agent, session controls), the chat, and the orchestration panel (side
 * by side, or on a phone as two tabs).
 */
import { useCallback, useRef, useState } from 'react';
import { AgentPicker } from './agent-picker.js';
import { ChatPanel } from './chat-panel.js';
import { ErrorBanner } from './error-banner.js';
import { OrchestrationPanel } from './orchestration-panel.js';
import { SessionControls } from './session-controls.js';
import { TemplateView } from './template-view.js';
import { useInspector } from './use-inspector.js';
import { type View, ViewTabs } from './view-tabs.js';

/** The whole page. */
export function App() {
  const inspector = useInspector();
  const [templateOpen, setTemplateOpen] = useState(false);
  const [view, setView] = useState<View>('chat');
  const header = useRef<HTMLElement>(null);
  // On a phone a tab shows its panel from where it matters: the orchestration from its top (right
  // under the tabs, wherever the chat was scrolled), the chat at its newest message.
  const showView = useCallback((next: View) => {
    setView(next);
    requestAnimationFrame(() => {
      const top = header.current ? header.current.offsetTop + header.current.offsetHeight : 0;
      if (next === 'orchestration') window.scrollTo({ top: Math.min(window.scrollY, top) });
      else window.scrollTo({ top: document.documentElement.scrollHeight });
    });
  }, []);
  const busy = inspector.status === 'submitted' || inspector.status === 'streaming';

  return (
    <div className="app">
      <header className="app-header" ref={header}>
        <h1 className="brand">
          Baton <span className="muted">inspector</span>
        </h1>
        <AgentPicker agents={inspector.agents} agentId={inspector.agentId} onSelect={inspector.selectAgent} />
        <SessionControls
          sessionId={inspector.sessionId}
          busy={busy}
          onNew={inspector.newSession}
          onReset={inspector.reset}
          onDelete={inspector.remove}
          onResume={inspector.resume}
          onShowTemplate={() => setTemplateOpen(true)}
        />
      </header>
      <ViewTabs view={view} onChange={showView} snapshot={inspector.snapshot} />
      <ErrorBanner notices={inspector.notices} onDismiss={inspector.dismiss} />
      <main className="app-main" data-view={view}>
        <ChatPanel
          agent={inspector.agent}
          messages={inspector.messages}
          busy={busy}
          onSend={inspector.send}
          onStop={inspector.stop}
          onAnswer={inspector.answerApproval}
        />
        <OrchestrationPanel
          agent={inspector.agent}
          snapshot={inspector.snapshot}
          tools={inspector.tools}
          timeline={inspector.timeline}
          sessionTimeline={inspector.sessionTimeline}
          hasSession={inspector.sessionId !== null}
        />
      </main>
      <TemplateView agent={inspector.agent} open={templateOpen} onClose={() => setTemplateOpen(false)} />
    </div>
  );
}
