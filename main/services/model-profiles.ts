/**
 * Per-model defaults, remembered: what the user set while a model was loaded (max context, max
 * new tokens, the sampler, the system prompt) and the weights choice it was opened with
 * (`quantize`), kept per model path in the store's settings table (`model.profiles`, JSON
 * path → ModelProfile, the most recently touched first, at most PROFILE_LIMIT). Opening that
 * model again applies them: the max context and weights to the load, the rest to the settings.
 * A profile value the schema no longer accepts is dropped when read (the setting stays).
 */
import { settingsPatchSchema } from '../contract/channels.ts';
import { QUANTIZE_OPTIONS, type QuantizeOption, type Settings } from '../contract/types.ts';
import type { ConversationStore } from './store.ts';

const PROFILES_KEY = 'model.profiles';
/** Models whose defaults are kept (the least recently touched goes first). */
export const PROFILE_LIMIT = 64;

/** The settings a model remembers. */
export const PROFILE_KEYS = ['maxContext', 'maxTokens', 'temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'systemPrompt'] as const satisfies readonly (keyof Settings)[];
export type ProfileSettings = Partial<Pick<Settings, (typeof PROFILE_KEYS)[number]>>;

/** One model's remembered defaults: settings, and the weights choice (null: as stored). */
export interface ModelProfile {
  settings: ProfileSettings;
  quantize?: QuantizeOption | null;
}

/** Reads and records the per-model defaults in the store. */
export class ModelProfiles {
  constructor(private readonly store: ConversationStore) {}

  /** The remembered defaults of the model at `modelPath`, or null when none. */
  get(modelPath: string): ModelProfile | null {
    const raw = this.all()[modelPath];
    if (!raw || typeof raw !== 'object') return null;
    const r = raw as { settings?: Record<string, unknown>; quantize?: unknown };
    const settings: Record<string, unknown> = {};
    for (const k of PROFILE_KEYS) {
      const v = r.settings?.[k];
      if (v !== undefined && settingsPatchSchema.safeParse({ [k]: v }).success) settings[k] = v;
    }
    const quantize = r.quantize === null ? null : QUANTIZE_OPTIONS.find((q) => q === r.quantize);
    return { settings: settings as ProfileSettings, ...(quantize !== undefined ? { quantize } : {}) };
  }

  /**
   * Records what `patch` sets among PROFILE_KEYS (other keys are ignored) and, when given, the
   * weights choice, into the profile of `modelPath`; nothing is written when there is nothing to keep.
   */
  record(modelPath: string, patch: Partial<Settings>, quantize?: QuantizeOption | null): void {
    const picked: Record<string, unknown> = {};
    for (const k of PROFILE_KEYS) if (patch[k] !== undefined) picked[k] = patch[k];
    if (Object.keys(picked).length === 0 && quantize === undefined) return;
    const all = this.all();
    const before = this.get(modelPath);
    const next: ModelProfile = {
      settings: { ...(before?.settings ?? {}), ...picked },
      ...(quantize !== undefined ? { quantize } : before?.quantize !== undefined ? { quantize: before.quantize } : {}),
    };
    const rest = Object.entries(all).filter(([p]) => p !== modelPath).slice(0, PROFILE_LIMIT - 1);
    this.store.setSettings({ [PROFILES_KEY]: Object.fromEntries([[modelPath, next], ...rest]) });
  }

  private all(): Record<string, unknown> {
    const v = this.store.getSettings()[PROFILES_KEY];
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  }
}
