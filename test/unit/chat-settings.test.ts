/**
 * Presets at the services level, on a real SQLite store (a temporary folder): a chat's own system
 * prompt and sampler stored with the conversation (its own column, surviving a reopen) and laid
 * over the settings by `SettingsService.forConversation`; a chat max new tokens that leaves no
 * room for the prompt refused with both numbers; system prompt presets checked by the contract
 * (a repeated name refused, quoting it); per-model defaults remembered by `ModelProfiles` and
 * applied by `applyModelDefaults`; the window's own rule for exports (`effectiveSettings`) agrees
 * with the services'.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { chatSettingsSchema, requestSchemas, settingsPatchSchema } from '../../main/contract/channels.ts';
import { ServiceError } from '../../main/services/errors.ts';
import type { ModelService } from '../../main/services/model-service.ts';
import { ModelProfiles, PROFILE_LIMIT } from '../../main/services/model-profiles.ts';
import { SettingsService } from '../../main/services/settings.ts';
import { ConversationStore } from '../../main/services/store.ts';
import { effectiveSettings } from '../../main/contract/chat-settings.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-chat-settings-'));
after(() => rmSync(root, { recursive: true, force: true }));
const models = { trainedContext: 512, reload: async () => undefined } as unknown as ModelService;

test("a chat's own system prompt and sampler: stored with it, over the settings, kept by a reopen; {} clears them", () => {
  const dir = path.join(root, 'chat');
  let store = new ConversationStore(dir);
  const settings = new SettingsService(store, models);
  const a = store.createConversation('A');
  const b = store.createConversation('B');
  const summary = settings.setForConversation(a.id, { systemPrompt: 'You are terse.', temperature: 0, maxTokens: 64 });
  assert.deepEqual(summary.chatSettings, { systemPrompt: 'You are terse.', temperature: 0, maxTokens: 64 });
  const own = settings.forConversation(a.id);
  assert.deepEqual([own.systemPrompt, own.temperature, own.maxTokens, own.topK], ['You are terse.', 0, 64, 40]);
  const other = settings.forConversation(b.id);
  assert.deepEqual([other.systemPrompt, other.temperature, other.maxTokens], ['', 0.8, 128], 'another chat keeps the settings');
  assert.deepEqual(settings.forConversation(null), settings.get(), 'a new chat: the settings alone');
  store.close();

  store = new ConversationStore(dir);
  assert.deepEqual(store.getSummary(a.id).chatSettings, { systemPrompt: 'You are terse.', temperature: 0, maxTokens: 64 });
  assert.equal(store.listConversations().find((c) => c.id === b.id)?.chatSettings, undefined);
  assert.equal(store.setConversationSettings(a.id, {}).chatSettings, undefined);
  assert.equal(store.conversationSettings(a.id), null);
  assert.throws(() => store.setConversationSettings('nope', { topK: 1 }), /no conversation with id nope/);
  store.close();
});

test("a chat's max new tokens must leave room for the prompt; one the max context no longer allows is not used", async () => {
  const store = new ConversationStore(path.join(root, 'limits'));
  const settings = new SettingsService(store, models);
  const c = store.createConversation();
  assert.throws(
    () => settings.setForConversation(c.id, { maxTokens: 512 }),
    (e: unknown) => e instanceof ServiceError && e.code === 'INVALID_REQUEST' && /max new tokens \(512\).*max context \(512\)/.test(e.message),
  );
  assert.equal(store.conversationSettings(c.id), null, 'a refused change stores nothing');
  settings.setForConversation(c.id, { maxTokens: 300 });
  await settings.update({ maxContext: 256, maxTokens: 64 }, { generating: false });
  assert.equal(settings.forConversation(c.id).maxTokens, 64, 'the max context was lowered below it: the setting applies');
  // The contract refuses out-of-range values and unknown keys, quoting nothing silently.
  assert.equal(chatSettingsSchema.safeParse({ temperature: -1 }).success, false);
  assert.equal(chatSettingsSchema.safeParse({ seed: 1 }).success, false, 'the seed is not a chat setting');
  assert.equal(requestSchemas.setConversationSettings.safeParse({ id: c.id, settings: { topP: 0.5 } }).success, true);
  store.close();
});

test('system prompt presets: stored as a setting; a repeated name (any case) is refused, quoting it', async () => {
  const store = new ConversationStore(path.join(root, 'presets'));
  const settings = new SettingsService(store, models);
  assert.deepEqual(settings.get().systemPromptPresets, []);
  const presets = [{ name: 'Pirate', text: 'Speak like a pirate.' }, { name: 'Terse', text: 'Answer in one line.' }];
  assert.deepEqual((await settings.update({ systemPromptPresets: presets }, { generating: false })).systemPromptPresets, presets);
  const repeated = settingsPatchSchema.safeParse({ systemPromptPresets: [...presets, { name: 'pirate', text: 'x' }] });
  assert.equal(repeated.success, false);
  assert.match(repeated.error!.issues[0].message, /two system prompt presets are named "pirate"/);
  assert.equal(settingsPatchSchema.safeParse({ systemPromptPresets: [{ name: '  ', text: 'x' }] }).success, false, 'a blank name');
  store.close();
});

test('per-model defaults: what is set while a model is loaded is remembered per path, with its weights choice, and applied', () => {
  const store = new ConversationStore(path.join(root, 'profiles'));
  const settings = new SettingsService(store, models);
  const profiles = new ModelProfiles(store);
  assert.equal(profiles.get('/m/a.gguf'), null);
  profiles.record('/m/a.gguf', { maxContext: 256, temperature: 0.2, systemPrompt: 'A.', kvCacheBudgetMiB: 5 } as never);
  profiles.record('/m/a.gguf', {}, 'q8');
  profiles.record('/m/a.gguf', { topK: 7 });
  profiles.record('/m/b.bin', { temperature: 1.5 }, null);
  assert.deepEqual(profiles.get('/m/a.gguf'), { settings: { maxContext: 256, temperature: 0.2, systemPrompt: 'A.', topK: 7 }, quantize: 'q8' }, 'a setting a model does not remember (kept KV) is left out');
  assert.deepEqual(profiles.get('/m/b.bin'), { settings: { temperature: 1.5 }, quantize: null });
  settings.applyModelDefaults(profiles.get('/m/a.gguf')!.settings);
  const s = settings.get();
  assert.deepEqual([s.maxContext, s.temperature, s.systemPrompt, s.topK, s.maxTokens], [256, 0.2, 'A.', 7, 64]);
  // A stored value the schema refuses (hand-edited) is dropped when read; the list is bounded.
  store.setSettings({ 'model.profiles': { '/m/c': { settings: { temperature: -3, topP: 0.5 }, quantize: 'q3' } } });
  assert.deepEqual(profiles.get('/m/c'), { settings: { topP: 0.5 } });
  for (let i = 0; i < PROFILE_LIMIT + 5; i++) profiles.record(`/m/${i}`, { topK: i });
  assert.equal(Object.keys(store.getSettings()['model.profiles'] as object).length, PROFILE_LIMIT);
  assert.deepEqual(profiles.get(`/m/${PROFILE_LIMIT + 4}`)?.settings, { topK: PROFILE_LIMIT + 4 }, 'the newest kept');
  assert.equal(profiles.get('/m/0'), null, 'the oldest dropped');
  store.close();
});

test("the window's export rule is the services' rule", () => {
  const store = new ConversationStore(path.join(root, 'rule'));
  const settings = new SettingsService(store, models);
  const c = store.createConversation();
  for (const own of [{ systemPrompt: 'S', topP: 0.3 }, { maxTokens: 100 }, {}]) {
    settings.setForConversation(c.id, own);
    assert.deepEqual(effectiveSettings(settings.get(), store.getSummary(c.id).chatSettings), settings.forConversation(c.id), JSON.stringify(own));
  }
  store.close();
});
