/**
 * BudgetService counts a conversation's history once even when two budgets are computed at the
 * same time (the server's recount after an answer and the window's refresh overlap on every
 * answer); the count was once made twice, tokenizing the whole history on the worker each time.
 * The engine host here is a counting stand-in: what is under test is the caching, not the counts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Message } from '../../main/contract/types.ts';
import type { EngineHost } from '../../main/engine-host/host.ts';
import { BudgetService } from '../../main/services/budget.ts';
import { DocumentService } from '../../main/services/documents.ts';
import type { ModelService } from '../../main/services/model-service.ts';
import type { SettingsService } from '../../main/services/settings.ts';
import type { ConversationStore } from '../../main/services/store.ts';

test('overlapping budget computations of one conversation tokenize its history once', async () => {
  let counts = 0;
  const host = {
    model: { bundleDir: '/bundle' },
    countTokens: async (r: { messages: { content: string }[] }) => {
      counts++;
      await new Promise((res) => setTimeout(res, 10));
      return r.messages.reduce((n, m) => n + m.content.length, 0);
    },
    stats: async () => ({ rope: { capacity: 64, bytes: 512 }, kv: { capacity: 64, bytes: 4096 } }),
  } as unknown as EngineHost;
  const message = (role: Message['role'], content: string): Message => ({
    id: content,
    conversationId: 'c',
    role,
    content,
    status: 'complete',
    stats: null,
    error: null,
    createdAt: 0,
  });
  const store = {
    getConversation: () => ({ messages: [message('user', 'hello'), message('assistant', ' world')] }),
    conversationPolicy: () => null, // no policy of its own
    conversationThinking: () => null, // no Think toggle set
  } as unknown as ConversationStore;
  const get = () => ({ systemPrompt: '', maxContext: 512, maxTokens: 128, contextFullPolicy: 'stop' });
  const settings = { get, forConversation: get } as unknown as SettingsService;
  const models = { ready: async () => undefined, assertLoaded: () => undefined } as unknown as ModelService;
  const budget = new BudgetService(host, store, settings, models, new DocumentService(host, store));

  const [a, b] = await Promise.all([budget.compute('c', ''), budget.compute('c', '')]);
  assert.equal(a.history, 11);
  assert.deepEqual(b, a);
  assert.equal(counts, 1, 'the history was tokenized once');
  await budget.compute('c', '');
  assert.equal(counts, 1, 'and not again while it is unchanged');
});
