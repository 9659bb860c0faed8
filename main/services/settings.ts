/**
 * Settings: the defaults, what the user changed (persisted in the store's settings table, one
 * key per field), and the checks a change must pass. `maxContext` follows the loaded model's
 * trained context until the user sets it. A change of `maxContext`, `executionProvider`, `backend`,
 * `threads` or `kvCacheDtype` reloads the model with the new options through `ModelService.reload`; if that fails the old
 * model and the old settings stay, and the call rejects with the load error.
 */
import { DEFAULT_KV_CACHE_DTYPE } from '../engine/model/graph-target.ts';
import { effectiveSettings } from '../contract/chat-settings.ts';
import type { ChatSettings, ConversationSummary, Settings } from '../contract/types.ts';
import { settingsPatchSchema, type RequestOf } from '../contract/channels.ts';
import { ServiceError } from './errors.ts';
import type { ConversationStore } from './store.ts';
import type { ModelService, SettingsLoadOptions } from './model-service.ts';

/** Max context used before any model has loaded (stories260K's trained context). */
export const FALLBACK_MAX_CONTEXT = 512;

/** The desktop app's local API server port unless the user picks another. */
export const DEFAULT_LOCAL_SERVER_PORT = 8756;

/** Upper bound of the default reply reserve; small models get a quarter of their context. */
export const DEFAULT_MAX_TOKENS = 256;

/**
 * Every default except maxContext, which comes from the model, and maxTokens, which is
 * min(256, maxContext / 4): a 512-position model (stories260K) reserves 128, so a conversation
 * can hold a few exchanges before the meter turns red.
 */
export const DEFAULT_SETTINGS: Omit<Settings, 'maxContext' | 'maxTokens'> = {
  temperature: 0.8,
  topK: 40,
  topP: 0.95,
  minP: 0.05,
  repetitionPenalty: 1,
  seed: null,
  systemPrompt: '',
  systemPromptPresets: [],
  contextFullPolicy: 'stop',
  kvCacheBudgetMiB: 1024,
  executionProvider: 'auto',
  backend: 'native',
  threads: 0,
  kvCacheDtype: DEFAULT_KV_CACHE_DTYPE,
  modelsFolder: '',
  localServer: false,
  localServerPort: DEFAULT_LOCAL_SERVER_PORT,
  localServerCors: '',
};

/** The settings a change of which reloads the model. */
const RELOAD_KEYS = ['maxContext', 'executionProvider', 'backend', 'threads', 'kvCacheDtype'] as const satisfies readonly (keyof Settings)[];

const KEYS = ['maxContext', 'maxTokens', ...Object.keys(DEFAULT_SETTINGS)] as (keyof Settings)[];
const PREFIX = 'settings.';

export type SettingsPatch = RequestOf<'updateSettings'>;

/** The settings in effect (defaults under stored values) and validated, persisted changes. */
export class SettingsService {
  constructor(
    private readonly store: ConversationStore,
    private readonly models: ModelService,
  ) {}

  /** The settings in effect: stored values over the defaults. */
  get(): Settings {
    const stored = this.stored();
    const maxContext = stored.maxContext ?? this.models.trainedContext ?? FALLBACK_MAX_CONTEXT;
    return { ...DEFAULT_SETTINGS, maxContext, maxTokens: defaultMaxTokens(maxContext), ...stored };
  }

  /**
   * The settings a conversation runs under: the settings with its own system prompt and sampler
   * over them (null: a new conversation, the settings alone). A chat's max new tokens that the
   * max context no longer leaves room for (the max context was lowered since) is not used.
   */
  forConversation(conversationId: string | null): Settings {
    const s = this.get();
    const own = conversationId !== null ? this.store.conversationSettings(conversationId) : null;
    return effectiveSettings(s, own ?? undefined);
  }

  /**
   * Replaces a conversation's own system prompt and sampler (validated by the contract's schema;
   * `{}`: none). @throws ServiceError INVALID_REQUEST when its max new tokens is not below the
   * max context (quoting both); NOT_FOUND for an unknown conversation.
   */
  setForConversation(conversationId: string, own: ChatSettings): ConversationSummary {
    const maxContext = this.get().maxContext;
    if (own.maxTokens !== undefined && own.maxTokens >= maxContext) {
      throw new ServiceError('INVALID_REQUEST', `invalid chat settings: max new tokens (${own.maxTokens}) must be less than the max context (${maxContext}), or no room is left for the prompt`);
    }
    return this.store.setConversationSettings(conversationId, stripUndefined(own));
  }

  /**
   * Stores a model's remembered settings as the settings (no reload: the caller loads it with
   * them). A max new tokens the max context leaves no room for is skipped.
   */
  applyModelDefaults(defaults: Partial<Settings>): void {
    const values: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(stripUndefined(defaults))) values[PREFIX + k] = v;
    const maxContext = defaults.maxContext ?? this.get().maxContext;
    if (defaults.maxTokens !== undefined && defaults.maxTokens >= maxContext) delete values[`${PREFIX}maxTokens`];
    this.store.setSettings(values);
  }

  /** The max context the user chose, or undefined (the model's trained context applies). */
  get userMaxContext(): number | undefined {
    return this.stored().maxContext;
  }

  /**
   * Applies a patch already validated by the contract's schema.
   * @throws ServiceError INVALID_REQUEST when maxTokens ≥ maxContext; BUSY when the model must be
   *   reloaded while an answer is generated or a model loads; the engine's load error when the
   *   reload fails (nothing is changed then).
   */
  async update(patch: SettingsPatch, opts: { generating: boolean }): Promise<Settings> {
    const before = this.get();
    const next: Settings = { ...before, ...stripUndefined(patch) } as Settings;
    // A default follows what it derives from: max tokens the user never set is re-derived from
    // the new max context (else lowering the max context below 4 × 128 was refused, issue 9).
    if (patch.maxTokens === undefined && this.stored().maxTokens === undefined) next.maxTokens = defaultMaxTokens(next.maxContext);
    if (next.maxTokens >= next.maxContext) {
      throw new ServiceError(
        'INVALID_REQUEST',
        `invalid settings: max tokens (${next.maxTokens}) must be less than the max context (${next.maxContext}), or no room is left for the prompt`,
      );
    }
    const changed = (k: (typeof RELOAD_KEYS)[number]) => patch[k] !== undefined && patch[k] !== before[k];
    if (RELOAD_KEYS.some(changed)) {
      if (opts.generating) throw new ServiceError('BUSY', 'an answer is being generated; stop it before changing the max context, the execution provider, the backend, the threads or the KV cache');
      await this.models.reload(reloadOptions(next));
    }
    const values: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(stripUndefined(patch))) values[PREFIX + k] = v;
    this.store.setSettings(values);
    return this.get();
  }

  /**
   * Stores the execution provider before the first load, without a reload (`serve --ep`: the
   * window then shows what the server runs with). @throws ServiceError INVALID_REQUEST for a
   * value the schema refuses, quoting it.
   */
  presetExecutionProvider(ep: Settings['executionProvider']): void {
    if (!settingsPatchSchema.safeParse({ executionProvider: ep }).success) {
      throw new ServiceError('INVALID_REQUEST', `invalid settings: execution provider ${JSON.stringify(ep)} is not one of auto, cpu, webgpu, cuda`);
    }
    this.store.setSettings({ [`${PREFIX}executionProvider`]: ep });
  }

  /**
   * Stores the thread count before the first load, without a reload (`serve --threads`).
   * @throws ServiceError INVALID_REQUEST for a value outside 0–1024, quoting it.
   */
  presetThreads(threads: number): void {
    if (!settingsPatchSchema.safeParse({ threads }).success) {
      throw new ServiceError('INVALID_REQUEST', `invalid settings: threads ${JSON.stringify(threads)} is not a whole number from 0 to 1024`);
    }
    this.store.setSettings({ [`${PREFIX}threads`]: threads });
  }

  private stored(): Partial<Settings> {
    const all = this.store.getSettings();
    const out: Partial<Record<keyof Settings, unknown>> = {};
    for (const k of KEYS) {
      const v = all[PREFIX + k];
      // A value the schema no longer accepts (hand-edited, older version) falls back to the default.
      if (v !== undefined && settingsPatchSchema.safeParse({ [k]: v }).success) out[k] = v;
    }
    return out as Partial<Settings>;
  }
}

/** The default reply reserve for a max context: min(256, maxContext / 4), at least 1. */
function defaultMaxTokens(maxContext: number): number {
  return Math.max(1, Math.min(DEFAULT_MAX_TOKENS, Math.floor(maxContext / 4)));
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The load options the settings decide (`RELOAD_KEYS`), from the settings in effect. */
function reloadOptions(s: Settings): SettingsLoadOptions {
  return Object.fromEntries(RELOAD_KEYS.map((k) => [k, s[k]])) as SettingsLoadOptions;
}
