/**
 * The composer: a textbox named "Message" (Enter sends, Shift+Enter adds a line; a pasted file is
 * attached), Attach and the attached documents, Send — or Stop while an answer is generated
 * (Escape too; focus stays in the textbox) — and the context meter. When the budget says the next
 * message will not fit, the reason is shown with what can be done (for documents: raise the max
 * context, use the relevant parts, cancel; else: a new chat, a rolling window or a shorter reply
 * for this chat, each only when it would make the message fit), and Send is disabled (the reason its description and tooltip) and refuses
 * without calling the services. The line follows the live
 * budget, so a settings change updates it at once. For a model whose template reads
 * `enable_thinking`, the open chat's Think toggle sits beside the meter.
 */
import { useEffect, useRef, type KeyboardEvent } from 'react';
import { CONTEXT_FULL_WORDS } from '../../main/contract/context-full.ts';
import type { ContextBudget } from '../../main/contract/types.ts';
import { useBudget, useChat, useConversations, useOpenChatPolicy, useSettings, useStores, useUi } from '../hooks.ts';
import { ariaKeysOf, withKeys } from '../lib/shortcuts.ts';
import { IS_MAC } from '../window-effects.ts';
import { refusalReason } from '../lib/meter.ts';
import { conversationRecap } from '../lib/recap.ts';
import { isGenerating } from '../stores/chat.ts';
import { ContextMeter } from './ContextMeter.tsx';
import { Attachments, NotFitOffer, useOwnBudget } from './Documents.tsx';
import { SendIcon, StopIcon } from './icons.tsx';
import { ThinkToggle } from './Thinking.tsx';

export function Composer() {
  const stores = useStores();
  const draft = useChat((s) => s.draft);
  const refusal = useChat((s) => s.refusal);
  const conversationId = useChat((s) => s.conversationId);
  const generating = useChat(isGenerating);
  const liveReason = useBudget((s) => (s.budget && s.budget.conversationId === conversationId ? refusalReason(s.budget) : null));
  const budget = useOwnBudget(conversationId);
  const hasAttachments = useChat((s) => s.attachments.length > 0);
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

  // The live line wins over a refusal from an older budget: settings changes recount it.
  const reason = liveReason ?? (budget?.fits ? null : refusal);
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
          onPaste={(e) => {
            const files = [...e.clipboardData.files];
            if (files.length === 0) return;
            e.preventDefault();
            void stores.chat.getState().attachFiles(files);
          }}
          aria-describedby={reason ? 'composer-reason' : undefined}
        />
        <Attachments />
        <div className="composer-bar">
          <ContextMeter />
          <ThinkToggle />
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
            // Disabled while the message would be refused, with the reason as its description (and tooltip).
            <button
              key="send"
              type="button"
              className={`btn btn-primary btn-send${reason ? ' refused' : ''}`}
              disabled={!draft.trim() || reason !== null}
              title={reason ?? (draft.trim() ? 'Send (Enter)' : 'Type a message to send')}
              aria-describedby={reason ? 'composer-reason' : undefined}
              onClick={send}
            >
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
      {budget && hasAttachments && <NotFitOffer budget={budget} />}
      {reason && budget && !(hasAttachments && budget.documents > 0) && <RefusalActions budget={budget} />}
    </div>
  );
}

/**
 * What can make the conversation fit, as the services worked it out (`budget.remedies`): a new
 * chat, or one whose message starts with a summary of this one; a rolling window for this chat when the message fits without the history; a shorter
 * reply for this chat (its own max new tokens) only when one fits. Each changes this chat's
 * settings, never the global ones (with no chat yet, the settings).
 */
function RefusalActions({ budget }: { budget: ContextBudget }) {
  const stores = useStores();
  const setting = useSettings((s) => s.settings?.contextFullPolicy ?? 'stop');
  const { conversationId, own } = useOpenChatPolicy();
  const chatSettings = useConversations((s) => s.items.find((c) => c.id === conversationId)?.chatSettings);
  const policy = own ?? setting;
  const remedies = budget.remedies;
  const rolling = policy !== 'rolling-window' && (remedies ? remedies.rollingWindow : policy === 'stop');
  const shorter = remedies?.shorterReply ?? null;
  const useRolling = () =>
    void (conversationId !== null ? stores.conversations.getState().setPolicy(conversationId, 'rolling-window') : stores.settings.getState().update({ contextFullPolicy: 'rolling-window' }));
  // A new chat that starts from a summary of this one (the questions asked, the last answer's
  // beginning: renderer/lib/recap.ts), about a quarter of the max context (≈ 4 characters a token), then the draft.
  const withSummary = async () => {
    const { messages, draft } = stores.chat.getState();
    const recap = conversationRecap(messages, Math.max(200, budget.maxContext));
    await stores.conversations.getState().create();
    stores.chat.getState().setDraft(recap + draft);
  };
  const hasHistory = budget.history > 0;
  const useShorter = (maxTokens: number) =>
    void (conversationId !== null ? stores.conversations.getState().setChatSettings(conversationId, { ...chatSettings, maxTokens }) : stores.settings.getState().update({ maxTokens }));
  return (
    <div className="refusal-actions" role="group" aria-label="Make it fit">
      <button type="button" className="btn btn-secondary btn-xs" onClick={() => void stores.chat.getState().open(null)}>
        New chat
      </button>
      {hasHistory && (
        <button type="button" className="btn btn-secondary btn-xs" title="A new chat whose message starts with a summary of this one (the questions asked, the last answer's beginning)" onClick={() => void withSummary()}>
          New chat with a summary
        </button>
      )}
      {rolling && (
        <button type="button" className="btn btn-secondary btn-xs" title={`${CONTEXT_FULL_WORDS['rolling-window'].hint} (This chat only.)`} onClick={useRolling}>
          Use a rolling window
        </button>
      )}
      {shorter !== null && (
        <button type="button" className="btn btn-secondary btn-xs" title="This chat's max new tokens: the longest reply that fits" onClick={() => useShorter(shorter)}>
          Shorter reply ({shorter} tokens)
        </button>
      )}
    </div>
  );
}
