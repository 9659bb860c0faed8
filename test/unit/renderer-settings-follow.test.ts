/**
 * The settings panel follows the loaded model (issue 19: after switching from a 4,096-position
 * model to stories260K it showed max context 4096 "above the trained context (512)" while the
 * engine ran at 512, until a reload): a model that loads reloads the settings, and the library.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createStores } from '../../renderer/stores/index.ts';
import { FakeApi, ManualFrames, settle } from './renderer-fakes.ts';

test('a modelState ready event reloads the settings (max context follows the new model) and the library', async () => {
  const fake = new FakeApi();
  fake.settings = { ...fake.settings, maxContext: 4096 };
  const stores = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5 });
  await stores.start();
  await settle();
  assert.equal(stores.settings.getState().settings?.maxContext, 4096);

  // The services switched to stories260K: its trained context is the max context now.
  fake.settings = { ...fake.settings, maxContext: 512, maxTokens: 128 };
  fake.library = { ...fake.library, scanMs: 7 };
  const listsBefore = fake.calls.filter(([m]) => m === 'listModels').length;
  fake.emit('modelState', { ...fake.model, status: 'ready', error: null, info: { ...fake.model.info!, trainedContext: 512, maxContext: 512 } });
  await settle();
  await settle();
  assert.equal(stores.settings.getState().settings?.maxContext, 512, 'the window shows the max context the engine runs at');
  assert.equal(stores.settings.getState().settings?.maxTokens, 128);
  assert.equal(fake.calls.filter(([m]) => m === 'listModels').length, listsBefore + 1, 'the library is listed again (fit estimates follow the max context)');
  assert.equal(stores.library.getState().library?.scanMs, 7);
  stores.dispose();
});
