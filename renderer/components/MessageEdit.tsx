/**
 * A message edited inline: your message (Save & submit resends it; the answers after it stay as
 * the earlier branch) or an answer (Save keeps the edited text as a new version at its place;
 * nothing is generated, and the next turn's prompt reads it). Enter saves, Shift+Enter adds a
 * line, Escape cancels (this editor's Escape, not the window's Stop).
 */
import { useEffect, useRef, useState, type KeyboardEvent } from 'react';
import type { Message } from '../../main/contract/types.ts';
import { useStores } from '../hooks.ts';

/** What differs between editing your message and an answer: words only. */
const WORDS = {
  user: {
    label: 'Edit your message',
    area: 'Edit message',
    hint: 'Sends the edited message; the answers after it stay as the earlier branch (‹ › on the message).',
    save: 'Save & submit',
  },
  assistant: {
    label: 'Edit the answer',
    area: 'Edit answer',
    hint: 'Keeps the edited answer as a new version (‹ › on the answer); the next message reads it. Nothing is generated.',
    save: 'Save',
  },
} as const;

export function MessageEdit({ message }: { message: Message }) {
  const stores = useStores();
  const [value, setValue] = useState(message.content);
  const area = useRef<HTMLTextAreaElement>(null);
  const words = WORDS[message.role === 'assistant' ? 'assistant' : 'user'];
  useEffect(() => {
    const el = area.current;
    if (!el) return;
    el.focus();
    el.setSelectionRange(el.value.length, el.value.length);
  }, []);
  const submit = () => {
    if (value.trim()) void stores.chat.getState().submitEdit(message.id, value);
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'Escape') {
      e.preventDefault(); // this editor's Escape, not the window's
      stores.chat.getState().cancelEdit();
    }
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      submit();
    }
  };
  return (
    <article className={`msg msg-${message.role === 'assistant' ? 'assistant' : 'user'} msg-editing`} aria-label={words.label}>
      <textarea ref={area} aria-label={words.area} value={value} onChange={(e) => setValue(e.target.value)} onKeyDown={onKey} />
      <div className="msg-edit-actions">
        <span className="hint">{words.hint}</span>
        <button type="button" className="btn btn-ghost btn-sm" onClick={() => stores.chat.getState().cancelEdit()}>
          Cancel
        </button>
        <button type="button" className="btn btn-primary btn-sm" disabled={!value.trim()} onClick={submit}>
          {words.save}
        </button>
      </div>
    </article>
  );
}
