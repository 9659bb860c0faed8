/**
 * The settings form's building blocks, shared by the settings panel and a chat's own settings:
 * a labelled field with its hint, error or warning line; a text field that saves shortly after
 * typing stops (at once on blur or Enter); a number field checked against the contract's ranges
 * and the other settings; and the numeric fields' specs (FIELDS).
 */
import { useEffect, useRef, useState, type ReactNode } from 'react';
import { maxContextCaution } from '../../main/contract/context-caution.ts';
import { maxContextMemoryNote, type MemoryFacts } from '../../main/contract/memory-fit.ts';
import type { Settings } from '../../main/contract/types.ts';
import { parseDecimal, type Parsed, type RangeOptions } from '../lib/numbers.ts';

/** How long after the last keystroke a field saves, ms. */
export const SAVE_AFTER_MS = 600;

export type Parser = (text: string) => Parsed;

/** What a field's cross-checks may look at: the saved settings and the loaded model's trained context. */
export interface FieldContext {
  settings: Settings;
  trainedContext: number | null;
  /** The loaded model's memory estimate in parts (null: unknown, e.g. a remote engine). */
  memory?: MemoryFacts | null;
}

export const numberIn = (min: number, max: number, opts: RangeOptions = {}): Parser => (text) => parseDecimal(text, min, max, opts);

export type NumericKey = 'maxContext' | 'maxTokens' | 'temperature' | 'topK' | 'topP' | 'minP' | 'repetitionPenalty' | 'seed' | 'kvCacheBudgetMiB' | 'threads';

export interface NumberFieldSpec {
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

export const FIELDS: NumberFieldSpec[] = [
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
  {
    key: 'threads',
    label: 'CPU threads',
    hint: "ONNX Runtime's intra-op threads; 0: one per physical core. A change reloads the model.",
    parse: numberIn(0, 1024, { integer: true }),
    step: '1',
  },
];

export function Field(props: { id: string; label: string; hint?: string; error?: string | null; warning?: string | null; note?: string | null; children: ReactNode }) {
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
export function useDraftField<T>(saved: T, toText: (v: T) => string, commit: (text: string) => void, delayMs: number) {
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

export function NumberField(props: { field: NumberFieldSpec; value: number | null; ctx: FieldContext; onSave: (v: number | null) => Promise<boolean>; idPrefix?: string }) {
  const { field, value, ctx, onSave } = props;
  const id = `${props.idPrefix ?? 'setting'}-${field.key}`;
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

