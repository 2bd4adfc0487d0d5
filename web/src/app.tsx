/**
 * The inspector: header (agent, session controls), the chat, and the orchestration panel.
 */
import { useState } from 'react';
import { AgentPicker } from './agent-picker.js';
import { ChatPanel } from './chat-panel.js';
import { ErrorBanner } from './error-banner.js';
import { OrchestrationPanel } from './orchestration-panel.js';
import { SessionControls } from './session-controls.js';
import { TemplateView } from './template-view.js';
import { useInspector } from './use-inspector.js';

/** The whole page. */
export function App() {
  const inspector = useInspector();
  const [templateOpen, setTemplateOpen] = useState(false);
  const busy = inspector.status === 'submitted' || inspector.status === 'streaming';

  return (
    <div className="app">
      <header className="app-header">
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
      <ErrorBanner notices={inspector.notices} onDismiss={inspector.dismiss} />
      <main className="app-main">
        <ChatPanel
          agent={inspector.agent}
          messages={inspector.messages}
          busy={busy}
          onSend={inspector.send}
          onStop={inspector.stop}
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
