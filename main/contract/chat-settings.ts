/**
 * The settings a chat runs under: the settings with the chat's own system prompt and sampler over
 * them. One rule for the services (`SettingsService.forConversation`: the prompt sent, the meter)
 * and the window (its exports). Pure, type-only imports: the renderer bundles it.
 */
import type { ChatSettings, Settings } from './types.ts';

/**
 * `settings` with `own` over them; the chat's max new tokens only while below the max context
 * (a max context lowered since leaves no room for it).
 */
export function effectiveSettings(settings: Settings, own: ChatSettings | undefined): Settings {
  if (!own) return settings;
  const { maxTokens, ...rest } = own;
  return { ...settings, ...rest, ...(maxTokens !== undefined && maxTokens < settings.maxContext ? { maxTokens } : {}) };
}
