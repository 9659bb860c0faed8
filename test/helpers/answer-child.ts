/**
 * A child process for tests that kill the app mid-answer: starts the real services on the data
 * folder in argv[2] (cache in argv[3]) with stories260K, asks for a long greedy answer, and prints
 * one JSON line per event the parent waits on: {"ready":true} once the answer streams (its first
 * delta, with the message id), {"saveState":…} per answerSaveState. Runs until killed.
 */
import { startBackend } from '../../main/composition/start-backend.ts';
import { STORIES_BIN } from './paths.ts';

const [dataDir, cacheDir] = process.argv.slice(2);
const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
const s = await startBackend({ dataDir, cacheDir, defaultModel: STORIES_BIN, executionProvider: 'cpu' });
await s.modelLoaded;
// Greedy with a strong repetition bonus: stories260K never picks EOS, so the answer runs until killed.
await s.router.call('updateSettings', { maxContext: 16384, maxTokens: 12000, temperature: 0, repetitionPenalty: 0.1 });
let streaming = false;
s.router.onEvent((event, data) => {
  if (event === 'answerDelta' && !streaming) {
    streaming = true;
    say({ ready: true, messageId: (data as { messageId: string }).messageId });
  }
  if (event === 'answerSaveState') say({ saveState: data });
});
const conv = (await s.router.call('createConversation', {})) as { id: string };
await s.router.call('sendMessage', { conversationId: conv.id, content: 'Once upon a time' });
