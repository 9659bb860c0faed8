/**
 * SettingsService: a default follows the value it derives from. Issue 9's failing input: on a
 * fresh data folder, Settings → Max context 128 was refused ("max tokens (128) must be less than
 * the max context (128)") because the default max tokens (512 / 4) was checked as if the user had
 * chosen it. A max tokens the user did choose is still checked, and a refused change stores nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ServiceError } from '../../main/services/errors.ts';
import type { ModelService } from '../../main/services/model-service.ts';
import { SettingsService } from '../../main/services/settings.ts';
import type { ConversationStore } from '../../main/services/store.ts';

test('lowering the max context re-derives a default max tokens; a chosen one is still checked', async () => {
  const table: Record<string, unknown> = {};
  const store = {
    getSettings: () => ({ ...table }),
    setSettings: (values: Record<string, unknown>) => Object.assign(table, values),
  } as unknown as ConversationStore;
  const reloads: unknown[] = [];
  const models = { trainedContext: 512, reload: async (o: unknown) => void reloads.push(o) } as unknown as ModelService;
  const settings = new SettingsService(store, models);
  assert.deepEqual([settings.get().maxContext, settings.get().maxTokens], [512, 128]);

  const lowered = await settings.update({ maxContext: 128 }, { generating: false });
  assert.deepEqual([lowered.maxContext, lowered.maxTokens], [128, 32]);
  assert.deepEqual(reloads, [{ maxContext: 128, executionProvider: 'auto', backend: 'native', threads: 0, kvCacheDtype: 'float16' }]);

  await settings.update({ maxTokens: 100 }, { generating: false });
  await assert.rejects(
    settings.update({ maxContext: 64 }, { generating: false }),
    (e: unknown) => e instanceof ServiceError && e.code === 'INVALID_REQUEST' && /max tokens \(100\).*max context \(64\)/.test(e.message),
  );
  assert.deepEqual([settings.get().maxContext, settings.get().maxTokens], [128, 100], 'a refused change changes nothing');
});

test('the KV cache setting: float16 by default, float32 reloads the model with it; anything else is refused', async () => {
  const table: Record<string, unknown> = {};
  const store = { getSettings: () => ({ ...table }), setSettings: (values: Record<string, unknown>) => Object.assign(table, values) } as unknown as ConversationStore;
  const reloads: { kvCacheDtype?: string }[] = [];
  const models = { trainedContext: 512, reload: async (o: { kvCacheDtype?: string }) => void reloads.push(o) } as unknown as ModelService;
  const settings = new SettingsService(store, models);
  assert.equal(settings.get().kvCacheDtype, 'float16');
  await settings.update({ kvCacheDtype: 'float32' }, { generating: false });
  assert.deepEqual(reloads.map((o) => o.kvCacheDtype), ['float32'], 'one reload, with float32');
  assert.equal(settings.get().kvCacheDtype, 'float32');
  await settings.update({ kvCacheDtype: 'float32' }, { generating: false });
  assert.equal(reloads.length, 1, 'the same value reloads nothing');
  await assert.rejects(settings.update({ kvCacheDtype: 'float16' }, { generating: true }), (e: unknown) => e instanceof ServiceError && e.code === 'BUSY' && /the KV cache/.test(e.message));
  const { settingsPatchSchema } = await import('../../main/contract/channels.ts');
  assert.equal(settingsPatchSchema.safeParse({ kvCacheDtype: 'q8_0' }).success, false);
});

test('top-p takes 0 in the settings as in the CLI and /v1 (the sampler keeps the most likely token alone); below 0 is refused', async () => {
  const { settingsPatchSchema } = await import('../../main/contract/channels.ts');
  assert.equal(settingsPatchSchema.safeParse({ topP: 0 }).success, true);
  assert.equal(settingsPatchSchema.safeParse({ topP: -0.1 }).success, false);
  assert.equal(settingsPatchSchema.safeParse({ topP: 1.01 }).success, false);
});
