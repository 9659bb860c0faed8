/**
 * The generation loop on a stand-in backend that needs no weights (nanochat's mock-model engine
 * tests): the real stories260K tokenizer (a file, not a model) and a backend whose logits follow
 * a script, so every step of `Engine.generate` — prefix reuse, chunked prefill, sample → accept
 * → decode step, EOS, stop strings, max tokens, context-full, the context shift, cancel, backend
 * failure — is checked against positions and token ids written here; and where a context shift
 * cuts (the kept prefix — the system prompt, or the first exchange under truncate middle — and
 * the turn starts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { KeyRotation, KvCache } from '../../main/engine/cache/kv-cache.ts';
import type { RopeTables } from '../../main/engine/cache/rope-cache.ts';
import { SessionRunError } from '../../main/engine/errors.ts';
import { ContextShifter, planShift } from '../../main/engine/generate/context-shift.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import type { SessionInfo } from '../../main/engine/model/backend.ts';
import type { ModelManifest } from '../../main/engine/model/manifest.ts';
import { convertLlama2cTokenizer } from '../../main/engine/tokenizer/llama2c-tokenizer.ts';
import { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { STORIES_TOKENIZER } from '../helpers/paths.ts';
import { StandInBackend } from '../helpers/stand-in-backend.ts';

const V = 512;
const EOS = 2;
const HALF = 4;
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

const manifest: ModelManifest = {
  format: 'ropewalk-bundle',
  version: 1,
  name: 'stand-in',
  source: { kind: 'llama2c', path: 'none', sha256: '0' },
  config: {
    architecture: 'llama',
    hiddenSize: 8,
    intermediateSize: 8,
    numLayers: 1,
    numHeads: 1,
    numKvHeads: 1,
    headDim: 2 * HALF,
    vocabSize: V,
    rmsNormEps: 1e-5,
    tiedEmbeddings: true,
    attentionBias: false,
    qkNorm: false,
    rope: { theta: 10000, rotaryDim: 2 * HALF, layout: 'interleaved' },
    trainedContext: 64,
  },
  specialTokens: { bos: 1, eos: [EOS] },
  addBos: true,
  chatTemplate: null,
  dtype: 'float32',
};
const tokenizer = TextTokenizer.fromJson(
  convertLlama2cTokenizer(new Uint8Array(readFileSync(STORIES_TOKENIZER)), STORIES_TOKENIZER, V).tokenizerJson,
  {},
  { bos: 1, eos: [EOS], addBos: true, modelVocabSize: V, file: 'tok512', exactVocab: true },
);

/** What one backend run was given. */
interface RunCall {
  tokens: number[];
  past: number;
  rope: RopeTables;
  kvCapacity?: number;
  kvGrowths?: number;
}

/** Logits that put all mass on `next(last token fed)`; EOS for tokens the script does not know. */
class ScriptedBackend extends StandInBackend {
  readonly info: SessionInfo = { backend: 'native', executionProvider: 'cpu', fallbackReason: null, nodesOnCpu: null };
  readonly calls: RunCall[] = [];
  readonly shifts: { keep: number; drop: number; past: number }[] = [];
  failAtCall = -1;
  private readonly logits = new Float32Array(V);
  constructor(private readonly next: Map<number, number>) {
    super();
  }

  async run(tokenIds: ArrayLike<number>, rope: RopeTables, kv: KvCache): Promise<Float32Array> {
    assert.equal(rope.cos.length, rope.sin.length);
    assert.ok(kv.length + tokenIds.length <= kv.capacity, 'run before kv.ensure');
    this.calls.push({ tokens: Array.from(tokenIds), past: kv.length, rope, kvCapacity: kv.capacity, kvGrowths: kv.stats.growths });
    if (this.calls.length - 1 === this.failAtCall) throw new SessionRunError('scripted failure', { input_ids: [1, tokenIds.length] });
    this.logits.fill(0);
    this.logits[this.next.get(tokenIds[tokenIds.length - 1]) ?? EOS] = 1;
    return this.logits;
  }

  override shift(kv: KvCache, keep: number, drop: number, rotation: KeyRotation): void {
    this.shifts.push({ keep, drop, past: kv.length });
    super.shift(kv, keep, drop, rotation);
  }
}

const PROMPT = 'Once upon a time';
const promptIds = tokenizer.encode(PROMPT, { addBos: true, parseSpecial: false });
/** The scripted answer: " there was a big cat." then EOS (SentencePiece adds the leading space). */
const answerIds = tokenizer.encode('there was a big cat.', { addBos: false, parseSpecial: false });

function scripted(opts: { prefillChunk?: number; maxContext?: number } = {}): { engine: Engine; backend: ScriptedBackend } {
  const chain = [promptIds[promptIds.length - 1], ...answerIds];
  assert.equal(new Set(chain).size, chain.length, 'the script needs distinct tokens');
  const next = new Map(chain.slice(0, -1).map((t, i) => [t, chain[i + 1]]));
  const backend = new ScriptedBackend(next);
  return { engine: new Engine({ manifest, tokenizer, backend, bundleDir: 'none' }, opts), backend };
}

async function collect(engine: Engine, req: Partial<GenerationRequest>, signal?: AbortSignal) {
  const events: GenerationEvent[] = [];
  for await (const ev of engine.generate({ prompt: PROMPT, maxTokens: 50, sampler: GREEDY, ...req }, { signal })) events.push(ev);
  const done = events.at(-1);
  assert.ok(done?.type === 'done');
  return { events, done };
}

describe('Engine.generate on a scripted backend', () => {
  it('a prompt in several chunks grows the KV cache once, before its first chunk, to fit the whole prompt and the first sampled token (was: once per chunk, each growth mapping fresh memory and copying the held rows)', async () => {
    const { engine, backend } = scripted({ prefillChunk: 2 });
    await collect(engine, {});
    const P = promptIds.length;
    const chunks = Math.ceil(P / 2);
    assert.ok(chunks >= 3, `the prompt runs in ${chunks} chunks`);
    const prefill = backend.calls.slice(0, chunks);
    let want = 1;
    while (want < P + 1) want *= 2;
    assert.deepEqual(prefill.map((c) => [c.kvCapacity, c.kvGrowths]), prefill.map(() => [want, 1]));
  });

  it('prefills in chunks at increasing positions, then one decode step per token until EOS', async () => {
    const { engine, backend } = scripted({ prefillChunk: 2 });
    const { events, done } = await collect(engine, {});
    assert.equal(done.reason, 'stop');
    assert.deepEqual(done.tokens, answerIds);
    assert.equal(done.text, ' there was a big cat.');
    const P = promptIds.length;
    const chunks = Math.ceil(P / 2);
    assert.deepEqual(backend.calls.slice(0, chunks).map((c) => [c.past, c.tokens.length]), Array.from({ length: chunks }, (_, i) => [2 * i, Math.min(2, P - 2 * i)]));
    // Every answer token but the last one sampled before EOS is fed back, at the next position.
    assert.deepEqual(backend.calls.slice(chunks).map((c) => [c.past, c.tokens]), answerIds.map((t, i) => [P + i, [t]]));
    assert.ok(backend.calls.every((c) => c.rope.cos.length === c.rope.rows * HALF && c.rope.rows >= c.past + c.tokens.length), 'the RoPE cache is [rows, R/2] with rows ≥ P + T');
    // The engine hands the backend one tables object per RoPE growth (the same one on warm steps).
    const grown = backend.calls.filter((c, i) => i === 0 || c.rope !== backend.calls[i - 1].rope);
    assert.deepEqual(grown.map((c) => c.rope.rows), [...new Set(backend.calls.map((c) => c.rope.rows))], 'a new RoPE tables object only when the cache grew');
    assert.ok(grown.length < backend.calls.length, 'decode steps reuse the tables object');
    assert.deepEqual(events.filter((e) => e.type === 'prefill').map((e) => e.type === 'prefill' && e.processed), Array.from({ length: chunks }, (_, i) => Math.min(2 * i + 2, P)));
    assert.equal(events.filter((e) => e.type === 'token').map((e) => (e.type === 'token' ? e.text : '')).join(''), done.text);
    assert.equal(done.stats.backend, 'native');
    assert.equal(done.stats.contextUsed, P + answerIds.length);
  });

  it('ends at max tokens, at a stop string (not emitted) and at the max context', async () => {
    const a = await collect(scripted().engine, { maxTokens: 3 });
    assert.equal(a.done.reason, 'length');
    assert.deepEqual(a.done.tokens, answerIds.slice(0, 3));

    const b = await collect(scripted().engine, { stop: ['big'] });
    assert.equal(b.done.reason, 'stop');
    assert.equal(b.done.text, ' there was a ');

    const room = promptIds.length + 2;
    const { engine } = scripted({ maxContext: room });
    const c = await collect(engine, {});
    assert.equal(c.done.reason, 'context-full');
    assert.equal(c.done.stats.contextUsed, room - 1);
    assert.deepEqual(c.done.tokens, answerIds.slice(0, 2), 'prompt + generated = the max context; the last token is emitted, not fed');
  });

  it('with contextShift, the max context shifts the cache (BOS kept, half the rest dropped) and the answer goes on', async () => {
    const room = promptIds.length + 2;
    const { engine, backend } = scripted({ maxContext: room });
    const { done } = await collect(engine, { contextShift: true });
    assert.equal(done.reason, 'stop');
    assert.equal(done.text, ' there was a big cat.', 'the whole scripted answer, across the shifts');
    const first = backend.shifts[0];
    assert.deepEqual(first, { keep: 1, drop: Math.floor((room - 2) / 2), past: room - 1 }, 'a raw prompt keeps BOS; llama.cpp drops half of the rest');
    // The step after the shift feeds the token at the shifted position, without a new prefill.
    const after = backend.calls.find((c) => c.past === room - 1 - first.drop);
    assert.deepEqual(after?.tokens.length, 1);
    assert.equal(done.stats.contextShifts, backend.shifts.length);
    assert.equal(done.stats.droppedTokens, backend.shifts.reduce((n, s) => n + s.drop, 0));
    assert.equal(done.stats.contextUsed, promptIds.length + answerIds.length - done.stats.droppedTokens);
  });

  it('a prompt that fills the max context: context-full before any token, or with contextShift a shift before the first sample', async () => {
    const room = promptIds.length;
    const full = await collect(scripted({ maxContext: room }).engine, {});
    assert.equal(full.done.reason, 'context-full');
    assert.deepEqual(full.done.tokens, []);
    const { engine, backend } = scripted({ maxContext: room });
    const { done } = await collect(engine, { contextShift: true });
    assert.equal(done.reason, 'stop');
    assert.equal(done.text, ' there was a big cat.');
    assert.deepEqual(backend.shifts[0], { keep: 1, drop: Math.floor((room - 1) / 2), past: room }, 'shifted at the full prompt, before the first token');
  });

  it('a follow-up that extends the sequence prefills only what differs', async () => {
    const { engine, backend } = scripted();
    const first = await collect(engine, {});
    const before = backend.calls.length;
    const second = await collect(engine, { prompt: `${PROMPT}${first.done.text} The end` });
    const reused = second.done.stats.reusedTokens;
    assert.ok(reused >= promptIds.length, `reused ${reused} tokens`);
    assert.equal(backend.calls[before].past, reused);
    assert.equal(backend.calls[before].tokens.length, second.done.stats.promptTokens - reused);
  });

  it('an abort ends with cancelled and the partial answer; a backend failure ends with error and leaves the engine usable', async () => {
    const { engine, backend } = scripted();
    const ac = new AbortController();
    const events: GenerationEvent[] = [];
    for await (const ev of engine.generate({ prompt: PROMPT, maxTokens: 50, sampler: GREEDY }, { signal: ac.signal })) {
      events.push(ev);
      if (ev.type === 'token' && events.filter((e) => e.type === 'token').length === 2) ac.abort();
    }
    const done = events.at(-1);
    assert.ok(done?.type === 'done' && done.reason === 'cancelled');
    assert.deepEqual(done.tokens, answerIds.slice(0, 2));

    engine.reset();
    backend.failAtCall = backend.calls.length + 1; // the first decode step after a one-chunk prefill
    const failed = await collect(engine, {});
    assert.equal(failed.done.reason, 'error');
    assert.equal(failed.done.error?.code, 'SESSION_RUN');
    assert.equal(failed.done.stats.contextUsed, promptIds.length, 'the failed step committed nothing');
    const again = await collect(engine, {});
    assert.equal(again.done.reason, 'stop');
    assert.deepEqual(again.done.tokens, answerIds);
  });
});

describe('where a context shift cuts', () => {
  it('planShift: llama.cpp\'s half after the kept prefix, rounded up to a turn start within three quarters', () => {
    assert.deepEqual(planShift(101, 1, []), { keep: 1, drop: 50 }, 'no turns: half of the 100 after BOS');
    assert.deepEqual(planShift(101, 1, [20, 60, 90]), { keep: 1, drop: 59 }, 'the first turn start at or past the half');
    assert.deepEqual(planShift(101, 1, [20, 90]), { keep: 1, drop: 50 }, 'a start past three quarters: token-exact half');
    assert.equal(planShift(3, 2, []), null, 'one position after the prefix: nothing to drop');
  });

  it('ContextShifter keeps the system prompt and cuts at the start of a message', () => {
    const messages = [
      { role: 'system' as const, content: 'You are a storyteller.' },
      { role: 'user' as const, content: 'Tell me about a cat.' },
      { role: 'assistant' as const, content: ' The cat sat on the mat and looked at the big red ball.' },
      { role: 'user' as const, content: 'And the dog?' },
    ];
    const prompt = tokenizer.encodeChat(messages);
    const keep = tokenizer.encodeChat(messages.slice(0, 1), { addGenerationPrompt: false }).length;
    const secondUser = tokenizer.encodeChat(messages.slice(0, 3), { addGenerationPrompt: false }).length;
    assert.deepEqual(prompt.slice(0, secondUser), tokenizer.encodeChat(messages.slice(0, 3), { addGenerationPrompt: false }), 'the transcript grows by prefixes');
    // With the answer so far making the cache hold `length` positions, the cut lands on a message start.
    const length = keep + 2 * (secondUser - keep) - 1;
    const plan = new ContextShifter(tokenizer, prompt, messages).next(length);
    assert.deepEqual(plan, { keep, drop: secondUser - keep }, 'the first exchange leaves, the system prompt stays');
    const raw = new ContextShifter(tokenizer, promptIds, null).next(41);
    assert.deepEqual(raw, { keep: 1, drop: 20 }, 'a raw prompt keeps BOS');
  });

  it('ContextShifter encodes the conversation up to each message once, at the first shift only', () => {
    const messages = [
      { role: 'system' as const, content: 'You are a storyteller.' },
      { role: 'user' as const, content: 'Tell me about a cat.' },
      { role: 'assistant' as const, content: ' The cat sat on the mat.' },
      { role: 'user' as const, content: 'And the dog?' },
      { role: 'assistant' as const, content: ' The dog ran after the ball.' },
      { role: 'user' as const, content: 'And the bird?' },
    ];
    const prompt = tokenizer.encodeChat(messages);
    const encoded: number[] = [];
    const counting = Object.create(tokenizer) as TextTokenizer;
    counting.encodeChat = (msgs, opts) => {
      encoded.push(msgs.length);
      return tokenizer.encodeChat(msgs, opts);
    };
    const shifter = new ContextShifter(counting, prompt, messages, 'first-exchange');
    assert.ok(shifter.next(prompt.length + 40));
    assert.deepEqual([...encoded].sort((a, b) => a - b), [1, 2, 3, 4, 5], 'one encoding per message boundary, none twice');
    shifter.next(prompt.length + 40);
    assert.equal(encoded.length, 5, 'a later shift encodes nothing');
  });

  it("ContextShifter 'first-exchange' (truncate middle) keeps everything before the second user turn and drops the oldest turns after it", () => {
    const messages = [
      { role: 'system' as const, content: 'You are a storyteller.' },
      { role: 'user' as const, content: 'Tell me about a cat.' },
      { role: 'assistant' as const, content: ' The cat sat on the mat.' },
      { role: 'user' as const, content: 'And the dog in the big green garden?' },
      { role: 'assistant' as const, content: ' The dog ran and ran after the red ball all day long.' },
      { role: 'user' as const, content: 'And the bird?' },
    ];
    const prompt = tokenizer.encodeChat(messages);
    const end = (n: number) => tokenizer.encodeChat(messages.slice(0, n), { addGenerationPrompt: false }).length;
    const keep = end(3); // system, first question, its answer
    const third = end(5); // the second exchange ends where the third user turn starts
    assert.deepEqual(prompt.slice(0, third), tokenizer.encodeChat(messages.slice(0, 5), { addGenerationPrompt: false }), 'the transcript grows by prefixes');
    const length = keep + 2 * (third - keep) - 1;
    const shifter = new ContextShifter(tokenizer, prompt, messages, 'first-exchange');
    assert.deepEqual(shifter.next(length), { keep, drop: third - keep }, 'the second exchange leaves, the system prompt and the first exchange stay');
    // The next shift keeps the same prefix: the answer's oldest tokens go, token-exact (no turn start left).
    assert.deepEqual(shifter.next(length), { keep, drop: Math.floor((length - keep) / 2) });
    assert.equal(shifter.shifts, 2);
    // Rolling window on the same conversation keeps the system prompt only.
    assert.equal(new ContextShifter(tokenizer, prompt, messages, 'system').next(length)?.keep, end(1));
    // A leading assistant message is an exchange of its own (as context-policy.ts's `exchanges`).
    const leading = [{ role: 'assistant' as const, content: ' Hello.' }, ...messages.slice(1, 4)];
    const leadingPrompt = tokenizer.encodeChat(leading);
    const leadingEnd = tokenizer.encodeChat(leading.slice(0, 1), { addGenerationPrompt: false }).length;
    assert.equal(new ContextShifter(tokenizer, leadingPrompt, leading, 'first-exchange').next(leadingPrompt.length + 20)?.keep, leadingEnd);
  });

  it("ContextShifter 'first-exchange' falls back to the rolling window's prefix while the first exchange is the one being answered (and for a raw prompt)", () => {
    // The first answer runs long: there is no turn after the first exchange to drop, so the shift
    // keeps what rolling window keeps (the answer goes on instead of ending at context-full).
    const withSystem = [
      { role: 'system' as const, content: 'You are a storyteller.' },
      { role: 'user' as const, content: 'Tell me a long story about a cat and a dog.' },
    ];
    const prompt = tokenizer.encodeChat(withSystem);
    const system = tokenizer.encodeChat(withSystem.slice(0, 1), { addGenerationPrompt: false }).length;
    const length = prompt.length + 40;
    const first = new ContextShifter(tokenizer, prompt, withSystem, 'first-exchange').next(length);
    assert.deepEqual(first, new ContextShifter(tokenizer, prompt, withSystem, 'system').next(length));
    assert.equal(first?.keep, system, 'the system prompt stays');
    const bare = withSystem.slice(1);
    const barePrompt = tokenizer.encodeChat(bare);
    assert.equal(new ContextShifter(tokenizer, barePrompt, bare, 'first-exchange').next(barePrompt.length + 40)?.keep, 1, 'no system prompt: BOS');
    assert.deepEqual(new ContextShifter(tokenizer, promptIds, null, 'first-exchange').next(41), { keep: 1, drop: 20 }, 'a raw prompt keeps BOS');
  });

  it('a contextShift that is not true, false or "first-exchange" is refused, quoting it', async () => {
    const { engine } = scripted();
    await assert.rejects(collect(engine, { contextShift: 'middle' as never }), /invalid context shift: "middle" is not true, false or "first-exchange"/);
  });
});
