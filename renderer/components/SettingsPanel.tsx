/**
 * Settings: max context, max new tokens, sampling (temperature, top-k, top-p, min-p, repetition
 * penalty, seed), memory for kept KV caches, system prompt, what to do when the context is full, execution provider
 * preference. Each field is checked here against the contract's ranges (the services check
 * again) and saved on its own shortly after typing stops, or at once on blur / Enter.
 */
import { useEffect, useRef, useState, type ReactNode } from 'react';
import { maxContextCaution } from '../../main/contract/context-caution.ts';
import { maxContextMemoryNote, type MemoryFacts } from '../../main/contract/memory-fit.ts';
import { CONTEXT_FULL_WORDS } from '../../main/contract/context-full.ts';
import type { ContextFullPolicy, Settings } from '../../main/contract/types.ts';
import { useModel, useOpenChatPolicy, useSettings, useStores } from '../hooks.ts';
import type { SettingsPatch } from '../stores/settings.ts';
import { parseDecimal, type Parsed, type RangeOptions } from '../lib/numbers.ts';
import { LocalServerSection } from './LocalServerSection.tsx';

type Parser = (text: string) => Parsed;

/** What a field's cross-checks may look at: the saved settings and the loaded model's trained context. */
interface FieldContext {
  settings: Settings;
  trainedContext: number | null;
  /** The loaded model's memory estimate in parts (null: unknown, e.g. a remote engine). */
  memory: MemoryFacts | null;
}

const numberIn = (min: number, max: number, opts: RangeOptions = {}): Parser => (text) => parseDecimal(text, min, max, opts);

type NumericKey = 'maxContext' | 'maxTokens' | 'temperature' | 'topK' | 'topP' | 'minP' | 'repetitionPenalty' | 'seed' | 'kvCacheBudgetMiB';

interface NumberFieldSpec {
  key: NumericKey;
  label: string;
  hint: string;
  parse: Parser;
  step: string;
  placeholder?: string;
  /** Why a value in range is still refused, given the other settings (null: accepted). */
  refuse?: (value: number, ctx: FieldContext) => string | null;
  /** A caution shown at the field for a value that is allowed. */
  warn?: (value: number, ctx: FieldContext) => string | null;
  /** A fact about the value as typed, shown under the field (null: none). */
  note?: (value: number, ctx: FieldContext) => string | null;
}

const FIELDS: NumberFieldSpec[] = [
  {
    key: 'maxContext',
    label: 'Max context',
    hint: 'Bound on prompt + answer positions (tokens).',
    parse: numberIn(16, 1 << 20, { integer: true }),
    step: '1',
    warn: (v, { trainedContext }) => maxContextCaution(v, trainedContext),
    // The KV cache this max context takes, and whether the model fits with it: the load's own estimate.
    note: (v, { memory }) => (memory ? maxContextMemoryNote(memory, v) : null),
  },
  {
    key: 'maxTokens',
    label: 'Max new tokens',
    hint: 'Longest answer; reserved in the budget.',
    parse: numberIn(1, 1 << 20, { integer: true }),
    step: '1',
    refuse: (v, { settings }) =>
      v >= settings.maxContext ? `Must be less than the max context (${settings.maxContext.toLocaleString('en-US')}), or no room is left for the prompt.` : null,
  },
  { key: 'temperature', label: 'Temperature', hint: '0 picks the likeliest token.', parse: numberIn(0, 100), step: '0.05' },
  { key: 'topK', label: 'Top-k', hint: '0 turns it off.', parse: numberIn(0, 1 << 20, { integer: true }), step: '1' },
  { key: 'topP', label: 'Top-p', hint: '1 turns it off; 0 keeps only the most likely token.', parse: numberIn(0, 1), step: '0.01' },
  { key: 'minP', label: 'Min-p', hint: '0 turns it off.', parse: numberIn(0, 1, { maxOpen: true }), step: '0.01' },
  { key: 'repetitionPenalty', label: 'Repetition penalty', hint: '1 turns it off.', parse: numberIn(0, 10, { minOpen: true }), step: '0.05' },
  { key: 'seed', label: 'Seed', hint: 'Empty: a new random seed per answer.', parse: numberIn(0, 2 ** 32 - 1, { integer: true, nullable: true }), step: '1', placeholder: 'Random' },
  {
    key: 'kvCacheBudgetMiB',
    label: 'Kept KV caches (MiB)',
    hint: 'Memory for the KV caches of recent conversations, so going back to one does not prefill it again; the least recently used goes first; 0 keeps none.',
    parse: numberIn(0, 1 << 20, { integer: true }),
    step: '64',
  },
];

const SAVE_AFTER_MS = 600;

export function SettingsPanel() {
  const stores = useStores();
  const settings = useSettings((s) => s.settings);
  const saving = useSettings((s) => s.saving > 0);
  const trainedContext = useModel((s) => s.model?.info?.trainedContext ?? null);
  const memory = useModel((s) => s.model?.info?.memory ?? null);
  const save = (patch: SettingsPatch) => stores.settings.getState().update(patch);

  if (!settings) return <section className="panel-section"><h2>Settings</h2><p className="muted">Loading…</p></section>;
  return (
    <section className="panel-section" aria-labelledby="settings-heading">
      <h2 id="settings-heading">
        Settings {saving && <span className="saving">saving…</span>}
      </h2>
      <div className="field-grid">
        {FIELDS.map((f) => (
          <NumberField
            key={f.key}
            field={f}
            value={settings[f.key]}
            ctx={{ settings, trainedContext, memory }}
            onSave={(v) => save({ [f.key]: v } as SettingsPatch)}
          />
        ))}
      </div>
      <SystemPromptField value={settings.systemPrompt} onSave={(systemPrompt) => save({ systemPrompt })} />
      {/* The chosen policy's hint, from the one table of the policies' words (main/contract/context-full.ts). */}
      <Field id="setting-context-full" label="When the context is full" hint={CONTEXT_FULL_WORDS[settings.contextFullPolicy].hint}>
        <select
          id="setting-context-full"
          value={settings.contextFullPolicy}
          onChange={(e) => void save({ contextFullPolicy: e.target.value as Settings['contextFullPolicy'] })}
        >
          <PolicyOptions />
        </select>
      </Field>
      <ChatPolicyField fallback={settings.contextFullPolicy} />
      <Field id="setting-ep" label="Execution provider" hint="Auto: CUDA, else WebGPU on a GPU, else CPU. The model panel shows the one in use, and why if it differs.">
        <select id="setting-ep" value={settings.executionProvider} onChange={(e) => void save({ executionProvider: e.target.value as Settings['executionProvider'] })}>
          <option value="auto">Auto</option>
          <option value="cpu">CPU</option>
          <option value="webgpu">WebGPU (any GPU: Vulkan, Direct3D 12, Metal)</option>
          <option value="cuda">CUDA (NVIDIA GPU)</option>
        </select>
      </Field>
      <Field id="setting-backend" label="Backend" hint="Native: the C++ addon (KV cache stays in place); JS: onnxruntime-node's API.">
        <select id="setting-backend" value={settings.backend} onChange={(e) => void save({ backend: e.target.value as Settings['backend'] })}>
          <option value="native">Native</option>
          <option value="js">JS</option>
        </select>
      </Field>
      <LocalServerSection onSave={save} />
    </section>
  );
}

/** The policies in the menus' order (the table's keys: stop, truncate the middle, rolling window). */
const POLICIES = Object.keys(CONTEXT_FULL_WORDS) as ContextFullPolicy[];

/** One <option> per context-full policy (value: the policy; text: its label; title: its hint), for both policy menus. */
function PolicyOptions() {
  return (
    <>
      {POLICIES.map((p) => (
        <option key={p} value={p} title={CONTEXT_FULL_WORDS[p].hint}>
          {CONTEXT_FULL_WORDS[p].label}
        </option>
      ))}
    </>
  );
}

/** The open chat's own context-full policy: "as the setting" (none of its own) or one of the three. */
function ChatPolicyField({ fallback }: { fallback: ContextFullPolicy }) {
  const stores = useStores();
  const { conversationId, own } = useOpenChatPolicy();
  if (conversationId === null) return null;
  return (
    <Field
      id="setting-chat-policy"
      label="This chat, when full"
      hint={own ? `${CONTEXT_FULL_WORDS[own].hint} (This chat only.)` : 'Overrides the setting above for the open chat only.'}
    >
      <select
        id="setting-chat-policy"
        value={own ?? ''}
        onChange={(e) => void stores.conversations.getState().setPolicy(conversationId, (e.target.value || null) as ContextFullPolicy | null)}
      >
        <option value="">As the setting ({CONTEXT_FULL_WORDS[fallback].label})</option>
        <PolicyOptions />
      </select>
    </Field>
  );
}

function Field(props: { id: string; label: string; hint?: string; error?: string | null; warning?: string | null; note?: string | null; children: ReactNode }) {
  const { id, label, hint, error, warning, note, children } = props;
  return (
    <div className={`field${error ? ' invalid' : ''}`}>
      <label htmlFor={id}>{label}</label>
      {children}
      {error ? (
        <span className="field-error" id={`${id}-error`} role="alert">
          {error}
        </span>
      ) : warning ? (
        <span className="field-warning" id={`${id}-error`} role="status">
          {warning}
        </span>
      ) : hint ? (
        <span className="field-hint">{hint}</span>
      ) : null}
      {note && (
        <span className="field-note" id={`${id}-note`} role="status">
          {note}
        </span>
      )}
    </div>
  );
}

/** A text field that saves `delayMs` after typing stops, at once on blur, and shows the saved value when not being edited. */
function useDraftField<T>(saved: T, toText: (v: T) => string, commit: (text: string) => void, delayMs: number) {
  const [text, setText] = useState(() => toText(saved));
  const editing = useRef(false);
  const timer = useRef<number | null>(null);
  useEffect(() => {
    if (!editing.current) setText(toText(saved));
    // toText is a pure formatter; only a new saved value matters.
  }, [saved]);
  useEffect(() => () => void (timer.current !== null && window.clearTimeout(timer.current)), []);
  const flush = (value: string) => {
    if (timer.current !== null) window.clearTimeout(timer.current);
    timer.current = null;
    commit(value);
  };
  return {
    text,
    change(value: string) {
      editing.current = true;
      setText(value);
      if (timer.current !== null) window.clearTimeout(timer.current);
      timer.current = window.setTimeout(() => flush(value), delayMs);
    },
    blur() {
      editing.current = false;
      flush(text);
    },
    flush: () => flush(text),
    /** The services refused `refused`: show the saved value again, unless the user typed on. */
    revert(refused: string) {
      setText((current) => {
        if (current !== refused) return current;
        editing.current = false;
        return toText(saved);
      });
    },
  };
}

function NumberField(props: { field: NumberFieldSpec; value: number | null; ctx: FieldContext; onSave: (v: number | null) => Promise<boolean> }) {
  const { field, value, ctx, onSave } = props;
  const id = `setting-${field.key}`;
  const [error, setError] = useState<string | null>(null);
  const latest = useRef(value);
  latest.current = value;
  const latestCtx = useRef(ctx);
  latestCtx.current = ctx;
  /** Range and cross-checks of the text as typed. */
  const check = (text: string): Parsed => {
    const parsed = field.parse(text);
    if (!parsed.ok || parsed.value === null || !field.refuse) return parsed;
    const why = field.refuse(parsed.value, latestCtx.current);
    return why ? { ok: false, error: why } : parsed;
  };
  const draft = useDraftField(
    value,
    (v) => (v === null ? '' : String(v)),
    (text) => {
      const parsed = check(text);
      if (!parsed.ok) return setError(parsed.error);
      setError(null);
      // A value the services refuse (their reason is in the banner) must not stay in the field.
      if (parsed.value !== latest.current) void onSave(parsed.value).then((ok) => ok || draft.revert(text));
    },
    SAVE_AFTER_MS,
  );
  const shown = field.parse(draft.text);
  const warning = shown.ok && shown.value !== null && field.warn ? field.warn(shown.value, ctx) : null;
  const note = shown.ok && shown.value !== null && field.note ? field.note(shown.value, ctx) : null;
  return (
    <Field id={id} label={field.label} hint={field.hint} error={error} warning={warning} note={note}>
      <input
        id={id}
        type="text"
        inputMode="decimal"
        value={draft.text}
        placeholder={field.placeholder}
        aria-invalid={error ? true : undefined}
        aria-describedby={error || warning ? `${id}-error` : undefined}
        onChange={(e) => {
          draft.change(e.target.value);
          const parsed = check(e.target.value);
          setError(parsed.ok ? null : parsed.error);
        }}
        onBlur={draft.blur}
        onKeyDown={(e) => e.key === 'Enter' && draft.flush()}
      />
    </Field>
  );
}

function SystemPromptField({ value, onSave }: { value: string; onSave: (v: string) => Promise<boolean> }) {
  const latest = useRef(value);
  latest.current = value;
  const draft = useDraftField(value, (v) => v, (text) => void (text !== latest.current && onSave(text)), 800);
  return (
    <Field id="setting-system-prompt" label="System prompt" hint="Sent before every conversation; counts in the budget.">
      <textarea
        id="setting-system-prompt"
        rows={3}
        maxLength={100_000}
        placeholder="None"
        value={draft.text}
        onChange={(e) => draft.change(e.target.value)}
        onBlur={draft.blur}
      />
    </Field>
  );
}
