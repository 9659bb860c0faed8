/**
 * The settings a chat runs under, as the window computes them for its exports: the settings with
 * the chat's own system prompt and sampler over them, by the rule the services apply
 * (main/services/settings.ts `forConversation`). Pure.
 */
import type { ChatSettings, Settings } from '../../main/contract/types.ts';

/**
 * `settings` with `own` over them; the chat's max new tokens only while below the max context
 * (a max context lowered since leaves no room for it).
 */
export function effectiveSettings(settings: Settings, own: ChatSettings | undefined): Settings {
  if (!own) return settings;
  const { maxTokens, ...rest } = own;
  return { ...settings, ...rest, ...(maxTokens !== undefined && maxTokens < settings.maxContext ? { maxTokens } : {}) };
}
