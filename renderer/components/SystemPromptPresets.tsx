/**
 * System prompts with presets: the settings' system prompt field (saved shortly after typing
 * stops), a menu of the saved presets (choosing one makes its text the system prompt), "Save as
 * preset" (a name, unique case-insensitively: the services refuse a repeat, quoting it) and
 * "Delete preset" for the one in use. `presetOf` says which preset a text is (the menus show it).
 * Also `SaveStatus`, the "saving… / Saved" line a form shows after each save.
 */
import { useEffect, useRef, useState } from 'react';
import type { SystemPromptPreset } from '../../main/contract/types.ts';
import { Field, useDraftField } from './fields.tsx';

/** How long "Saved" stays after a save, ms. */
export const SAVED_SHOWN_MS = 2500;

/** The preset whose text is `text` (the first of that text), or null. */
export function presetOf(presets: readonly SystemPromptPreset[], text: string): SystemPromptPreset | null {
  return presets.find((p) => p.text === text) ?? null;
}

/**
 * "saving…" while `saving`, then "Saved" for SAVED_SHOWN_MS after `savedAt` changed (a live
 * status line, so a screen reader hears it too); nothing otherwise.
 */
export function SaveStatus({ saving, savedAt, id }: { saving: boolean; savedAt: number | null; id: string }) {
  const [shown, setShown] = useState(false);
  useEffect(() => {
    if (savedAt === null) return;
    setShown(true);
    const t = window.setTimeout(() => setShown(false), SAVED_SHOWN_MS);
    return () => window.clearTimeout(t);
  }, [savedAt]);
  return (
    <span className="saving" id={id} role="status" aria-live="polite">
      {saving ? 'saving…' : shown ? 'Saved' : ''}
    </span>
  );
}

/** A system prompt text area that saves `delayMs` after typing stops and on blur. */
export function SystemPromptText(props: { id: string; value: string; placeholder: string; onSave: (v: string) => Promise<boolean> | void }) {
  const latest = useRef(props.value);
  latest.current = props.value;
  const draft = useDraftField(props.value, (v) => v, (text) => void (text !== latest.current && props.onSave(text)), 800);
  return (
    <textarea
      id={props.id}
      rows={3}
      maxLength={100_000}
      placeholder={props.placeholder}
      value={draft.text}
      onChange={(e) => draft.change(e.target.value)}
      onBlur={draft.blur}
    />
  );
}

/** The settings' system prompt with its presets menu, "Save as preset" and "Delete preset". */
export function SystemPromptField(props: {
  value: string;
  presets: SystemPromptPreset[];
  onSave: (patch: { systemPrompt?: string; systemPromptPresets?: SystemPromptPreset[] }) => Promise<boolean>;
}) {
  const { value, presets, onSave } = props;
  const [naming, setNaming] = useState<string | null>(null);
  const current = presetOf(presets, value);
  const saveAs = async (name: string) => {
    const trimmed = name.trim();
    if (!trimmed) return;
    const others = presets.filter((p) => p.name.toLowerCase() !== trimmed.toLowerCase());
    if (await onSave({ systemPromptPresets: [...others, { name: trimmed, text: value }] })) setNaming(null);
  };
  return (
    <Field id="setting-system-prompt" label="System prompt" hint="Sent before every conversation (a chat's own replaces it); counts in the budget.">
      <SystemPromptText id="setting-system-prompt" value={value} placeholder="None" onSave={(systemPrompt) => onSave({ systemPrompt })} />
      <div className="preset-row">
        <select
          id="setting-system-preset"
          aria-label="System prompt preset"
          value={current?.name ?? ''}
          onChange={(e) => {
            const chosen = presets.find((p) => p.name === e.target.value);
            if (chosen) void onSave({ systemPrompt: chosen.text });
          }}
        >
          <option value="">{presets.length ? 'Presets…' : 'No presets yet'}</option>
          {presets.map((p) => (
            <option key={p.name} value={p.name}>
              {p.name}
            </option>
          ))}
        </select>
        {current ? (
          <button type="button" className="btn btn-secondary btn-xs" onClick={() => void onSave({ systemPromptPresets: presets.filter((p) => p !== current) })}>
            Delete preset
          </button>
        ) : naming === null ? (
          <button type="button" className="btn btn-secondary btn-xs" disabled={!value.trim()} title={value.trim() ? undefined : 'Write a system prompt first'} onClick={() => setNaming('')}>
            Save as preset
          </button>
        ) : null}
      </div>
      {naming !== null && !current && (
        <form
          className="preset-row"
          onSubmit={(e) => {
            e.preventDefault();
            void saveAs(naming);
          }}
        >
          <input id="setting-preset-name" aria-label="Preset name" type="text" maxLength={80} placeholder="Preset name" value={naming} autoFocus onChange={(e) => setNaming(e.target.value)} />
          <button type="submit" className="btn btn-primary btn-xs" disabled={!naming.trim()}>
            Save
          </button>
          <button type="button" className="btn btn-ghost btn-xs" onClick={() => setNaming(null)}>
            Cancel
          </button>
        </form>
      )}
    </Field>
  );
}
