/**
 * The settings a chat may override (its own system prompt and sampler), in the order the window
 * lists them. Dependency-free and type-only in its imports, so the renderer bundles it at run time.
 */
import type { ChatSettings, Settings } from './types.ts';

/** Keys of `ChatSettings`, each also a key of `Settings` (what it overrides). */
export const CHAT_SETTING_KEYS = ['systemPrompt', 'temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'maxTokens'] as const satisfies readonly (keyof ChatSettings & keyof Settings)[];
