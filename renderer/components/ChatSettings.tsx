/**
 * A chat's own settings, in a popover under the header's "Chat settings" button: its system
 * prompt (as the setting, its own text, or a preset's) and its sampler and max new tokens (a
 * field left empty follows the setting, whose value is the placeholder). Saved with the
 * conversation through `setConversationSettings`, each change on its own, acknowledged with
 * "Saved"; the meter, the prompt and the exports follow them (main/contract/chat-settings.ts).
 */
import { useState } from 'react';
import type { ChatSettings } from '../../main/contract/types.ts';
import { useChat, useConversations, useModel, useSettings, useStores } from '../hooks.ts';
import { Field, FIELDS, NumberField, type NumberFieldSpec } from './fields.tsx';
import { presetOf, SaveStatus, SystemPromptText } from './SystemPromptPresets.tsx';

const NONE: ChatSettings = {};

/** Every field of ChatSettings, in the order the popover lists them (a missing one fails to type-check). */
const CHAT_SETTING_KEYS = ['systemPrompt', 'temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'maxTokens'] as const satisfies readonly (keyof ChatSettings)[];
type _AllListed = Exclude<keyof ChatSettings, (typeof CHAT_SETTING_KEYS)[number]> extends never ? true : never;
const _allListed: _AllListed = true;
void _allListed;

/** The numeric settings a chat may have its own of, as their fields: empty text means "as the setting". */
const CHAT_FIELDS: NumberFieldSpec[] = CHAT_SETTING_KEYS.flatMap((key) => {
  const spec = FIELDS.find((f) => f.key === key);
  if (!spec) return [];
  return [{ ...spec, parse: (text: string) => (text.trim() === '' ? { ok: true as const, value: null } : spec.parse(text)) }];
});

/** The header's "Chat settings" button and its popover (only with a chat open). */
export function ChatSettingsMenu() {
  const conversationId = useChat((s) => s.conversationId);
  const own = useConversations((s) => s.items.find((c) => c.id === conversationId)?.chatSettings ?? NONE);
  // The form is rendered only while open: its fields' labels would otherwise repeat the settings panel's.
  const [open, setOpen] = useState(false);
  if (!conversationId) return null;
  const count = Object.keys(own).length;
  return (
    <details className="menu chat-settings-menu" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary className={`btn btn-ghost btn-xs${count ? ' pressed' : ''}`} aria-label="Chat settings" title="This chat's own system prompt and sampling">
        Chat settings{count ? ` (${count})` : ''}
      </summary>
      <div className="menu-list chat-settings" role="group" aria-label="This chat's settings">
        {open && <ChatSettingsForm conversationId={conversationId} own={own} />}
      </div>
    </details>
  );
}

function ChatSettingsForm({ conversationId, own }: { conversationId: string; own: ChatSettings }) {
  const stores = useStores();
  const settings = useSettings((s) => s.settings);
  const trainedContext = useModel((s) => s.model?.info?.trainedContext ?? null);
  const [saving, setSaving] = useState(0);
  const [savedAt, setSavedAt] = useState<number | null>(null);
  if (!settings) return <p className="muted">Loading…</p>;
  /** Saves `own` with `patch` over it (an undefined value: that field follows the setting again). */
  const save = async (patch: Partial<Record<keyof ChatSettings, unknown>>): Promise<boolean> => {
    const next = Object.fromEntries(Object.entries({ ...own, ...patch }).filter(([, v]) => v !== undefined && v !== null)) as ChatSettings;
    setSaving((n) => n + 1);
    const ok = await stores.conversations.getState().setChatSettings(conversationId, next);
    setSaving((n) => n - 1);
    if (ok) setSavedAt(Date.now());
    return ok;
  };
  const presets = settings.systemPromptPresets;
  const source = own.systemPrompt === undefined ? '' : (presetOf(presets, own.systemPrompt)?.name ?? '\u0000own');
  return (
    <>
      <h3 className="chat-settings-title">
        This chat <SaveStatus id="chat-settings-status" saving={saving > 0} savedAt={savedAt} />
      </h3>
      <Field id="chat-system-source" label="System prompt" hint={own.systemPrompt === undefined ? 'As the setting: the system prompt in Settings.' : 'This chat only; counts in its budget.'}>
        <select
          id="chat-system-source"
          value={source}
          onChange={(e) => {
            const v = e.target.value;
            if (v === '') void save({ systemPrompt: undefined });
            else if (v === '\u0000own') void save({ systemPrompt: own.systemPrompt ?? settings.systemPrompt });
            else void save({ systemPrompt: presets.find((p) => p.name === v)?.text ?? '' });
          }}
        >
          <option value="">As the setting</option>
          <option value={'\u0000own'}>Its own</option>
          {presets.map((p) => (
            <option key={p.name} value={p.name}>
              Preset: {p.name}
            </option>
          ))}
        </select>
        {own.systemPrompt !== undefined && (
          <SystemPromptText id="chat-system-prompt" value={own.systemPrompt} placeholder="None (no system prompt in this chat)" onSave={(systemPrompt) => save({ systemPrompt })} />
        )}
      </Field>
      <div className="field-grid">
        {CHAT_FIELDS.map((f) => (
          <NumberField
            key={f.key}
            idPrefix="chat"
            field={{ ...f, placeholder: `${settings[f.key] ?? ''}` }}
            value={(own[f.key as keyof ChatSettings] as number | undefined) ?? null}
            ctx={{ settings, trainedContext }}
            onSave={(v) => save({ [f.key]: v ?? undefined })}
          />
        ))}
      </div>
      <p className="field-hint">Empty: as the setting (shown greyed).</p>
      {Object.keys(own).length > 0 && (
        <button type="button" className="btn btn-secondary btn-xs" onClick={() => void save(Object.fromEntries(CHAT_SETTING_KEYS.map((k) => [k, undefined])))}>
          Use the settings for everything
        </button>
      )}
    </>
  );
}
