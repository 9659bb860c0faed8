/**
 * The composer: a textbox named "Message" (Enter sends, Shift+Enter adds a line), Send — or Stop
 * while an answer is generated (Escape too; focus stays in the textbox) — and the context meter. When the budget says the next message
 * will not fit, the reason is shown and Send refuses without calling the services.
 */
import { useEffect, useRef, type KeyboardEvent } from 'react';
import { useBudget, useChat, useStores, useUi } from '../hooks.ts';
import { ariaKeysOf, withKeys } from '../lib/shortcuts.ts';
import { IS_MAC } from '../window-effects.ts';
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

  const focusWanted = useUi((s) => s.focusRequest === 'composer');

  // Focus the composer when a conversation opens, and when asked (after Stop, New chat).
  useEffect(() => {
    area.current?.focus();
  }, [conversationId]);
  useEffect(() => {
    if (!focusWanted) return;
    area.current?.focus();
    stores.ui.getState().focusDone();
  }, [focusWanted, stores]);

  const stop = () => {
    // Focus moves first: the Stop button is replaced by Send when the answer ends, and focus
    // on a removed button falls to the page body.
    area.current?.focus();
    void stores.chat.getState().stop();
  };

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
            <button
              key="stop"
              type="button"
              className="btn btn-stop"
              title={withKeys('Stop the answer', 'stop', IS_MAC)}
              aria-keyshortcuts={ariaKeysOf('stop', IS_MAC)}
              onClick={stop}
            >
              <StopIcon size={14} />
              <span>Stop</span>
            </button>
          ) : (
            <button key="send" type="button" className={`btn btn-primary btn-send${reason ? ' refused' : ''}`} disabled={!draft.trim()} onClick={send}>
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
