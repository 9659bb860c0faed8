/**
 * The composer: a textbox named "Message" (Enter sends, Shift+Enter adds a line), Send — or Stop
 * while an answer is generated — and the context meter. When the budget says the next message
 * will not fit, the reason is shown and Send refuses without calling the services.
 */
import { useEffect, useRef, type KeyboardEvent } from 'react';
import { useBudget, useChat, useStores } from '../hooks.ts';
import { refusalReason } from '../lib/meter.ts';
import { isGenerating } from '../stores/chat.ts';
import { ContextMeter } from './ContextMeter.tsx';
import { SendIcon, StopIcon } from './icons.tsx';

export function Composer() {
  const stores = useStores();
  const draft = useChat((s) => s.draft);
  const refusal = useChat((s) => s.refusal);
  const conversationId = useChat((s) => s.conversationId);
  const generating = useChat(isGenerating);
  const liveReason = useBudget((s) => (s.budget && s.budget.conversationId === conversationId ? refusalReason(s.budget) : null));
  const area = useRef<HTMLTextAreaElement>(null);

  // Focus the composer when a conversation opens.
  useEffect(() => {
    area.current?.focus();
  }, [conversationId]);

  const send = () => {
    if (generating) return;
    void stores.chat.getState().send();
  };

  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key !== 'Enter' || e.shiftKey || e.nativeEvent.isComposing) return;
    e.preventDefault();
    send();
  };

  const reason = refusal ?? liveReason;
  return (
    <div className="composer">
      <div className={`composer-box${reason ? ' blocked' : ''}`}>
        <textarea
          ref={area}
          aria-label="Message"
          placeholder="Message the model…"
          rows={1}
          value={draft}
          onChange={(e) => stores.chat.getState().setDraft(e.target.value)}
          onKeyDown={onKey}
          aria-describedby={reason ? 'composer-reason' : undefined}
        />
        <div className="composer-bar">
          <ContextMeter />
          <span className="composer-hint">
            <kbd>Enter</kbd> to send · <kbd>Shift</kbd>+<kbd>Enter</kbd> for a new line
          </span>
          {generating ? (
            <button type="button" className="btn btn-stop" onClick={() => void stores.chat.getState().stop()}>
              <StopIcon size={14} />
              <span>Stop</span>
            </button>
          ) : (
            <button type="button" className={`btn btn-primary btn-send${reason ? ' refused' : ''}`} disabled={!draft.trim()} onClick={send}>
              <span>Send</span>
              <SendIcon size={14} />
            </button>
          )}
        </div>
      </div>
      {reason && (
        <p className="composer-reason" id="composer-reason" role={refusal ? 'alert' : 'status'}>
          {reason}
        </p>
      )}
    </div>
  );
}
