/**
 * Hugging Face checkpoint import: synthetic checkpoints of every family (single file and sharded,
 * tied and untied, F32/F16/BF16) import to the hand-written ModelConfig with every weight present
 * and bit-equal to the file; config.json variants (every rope_scaling type, rope_parameters,
 * partial rotary, defaults) map as expected; bad folders fail fast with a ModelLoadError naming
 * the file and tensor.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readFile, rm, truncate, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { hashFiles } from '../../main/engine/model/content-hash.ts';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, Tensor32 } from '../../main/engine/model/manifest.ts';
import { readSafetensors, writeSafetensors, type TensorToWrite } from '../../main/engine/model/safetensors.ts';
import { countAllocations } from '../helpers/allocation-counter.ts';
import { QWEN3_TOKENIZER_CONFIG, QWEN3_TOKENIZER_VOCAB, rawSafetensors, writeSyntheticCheckpoint, type SyntheticSpec } from '../helpers/synthetic-hf.ts';

let root: string;
const base: Record<string, string> = {};
const specs: Record<string, SyntheticSpec> = {
  qwen3: { family: 'qwen3', dtype: 'BF16', sharded: true },
  qwen2: { family: 'qwen2', dtype: 'F16', tied: true },
  llama: { family: 'llama', dtype: 'F32', sharded: true, tied: true },
  mistral: { family: 'mistral', dtype: 'BF16', seed: 7 },
};
const QWEN_TEMPLATE = (JSON.parse(await readFile(QWEN3_TOKENIZER_CONFIG, 'utf8')) as { chat_template: string }).chat_template;
const V = QWEN3_TOKENIZER_VOCAB;

before(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'ropewalk-hf-'));
  for (const [k, spec] of Object.entries(specs)) {
    base[k] = path.join(root, `base-${k}`);
    await writeSyntheticCheckpoint(base[k], spec);
  }
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Asserts `p` rejects with a ModelLoadError whose message contains every string in `parts`. */
async function rejectsWith(p: Promise<unknown>, ...parts: string[]): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof ModelLoadError, `expected ModelLoadError, got ${String(e)}`);
    for (const s of parts) assert.ok(e.message.includes(s), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(s)}`);
    return true;
  });
}

/** Every tensor in the folder's safetensors files. */
async function allTensors(folder: string): Promise<Map<string, Tensor32>> {
  const out = new Map<string, Tensor32>();
  for (const f of ['model.safetensors', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']) {
    const exists = await stat(path.join(folder, f)).then(() => true, () => false);
    if (exists) for (const [k, v] of await readSafetensors(path.join(folder, f))) out.set(k, v);
  }
  return out;
}

const layerNames = (i: number, extra: string[]) =>
  ['input_layernorm.weight', 'self_attn.q_proj.weight', 'self_attn.k_proj.weight', 'self_attn.v_proj.weight',
    'self_attn.o_proj.weight', 'post_attention_layernorm.weight', 'mlp.gate_proj.weight', 'mlp.up_proj.weight',
    'mlp.down_proj.weight', ...extra].map((s) => `model.layers.${i}.${s}`);

describe('importHuggingFace: families', () => {
  const cases: { key: string; config: ModelConfig; extra: string[]; bos: number; addBos: boolean }[] = [
    {
      key: 'qwen3',
      config: {
        architecture: 'qwen3', hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16,
        vocabSize: V, rmsNormEps: 1e-6, tiedEmbeddings: false, attentionBias: false, qkNorm: true,
        rope: { theta: 1e6, rotaryDim: 16, layout: 'half' }, trainedContext: 40960,
      },
      extra: ['self_attn.q_norm.weight', 'self_attn.k_norm.weight'],
      bos: 151643, // tokenizer_config bos_token is null: config.json bos_token_id
      addBos: false,
    },
    {
      key: 'qwen2',
      config: {
        architecture: 'qwen2', hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8,
        vocabSize: V, rmsNormEps: 1e-6, tiedEmbeddings: true, attentionBias: true, qkNorm: false,
        rope: { theta: 1e6, rotaryDim: 8, layout: 'half' }, trainedContext: 32768,
      },
      extra: ['self_attn.q_proj.bias', 'self_attn.k_proj.bias', 'self_attn.v_proj.bias'],
      bos: 151643,
      addBos: false,
    },
    {
      key: 'llama',
      config: {
        architecture: 'llama', hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8,
        vocabSize: V, rmsNormEps: 1e-5, tiedEmbeddings: true, attentionBias: false, qkNorm: false,
        rope: {
          theta: 500000, rotaryDim: 8, layout: 'half',
          scaling: { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
        },
        trainedContext: 131072,
      },
      extra: [],
      bos: 151643, // tokenizer_config bos_token "<|endoftext|>"
      addBos: true, // no add_bos_token: the llama default
    },
    {
      key: 'mistral',
      config: {
        architecture: 'mistral', hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8,
        vocabSize: V, rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: false, qkNorm: false,
        rope: { theta: 1e6, rotaryDim: 8, layout: 'half' }, trainedContext: 32768,
      },
      extra: [],
      bos: 151643,
      addBos: true,
    },
  ];
  for (const c of cases) {
    it(`imports ${c.key} (${specs[c.key]!.dtype}, ${specs[c.key]!.sharded ? 'sharded' : 'single file'}, ${specs[c.key]!.tied ? 'tied' : 'untied'})`, async () => {
      const m = await importHuggingFace(base[c.key]!);
      assert.deepEqual(m.manifest.config, c.config);
      const expectedNames = [
        'model.embed_tokens.weight', ...layerNames(0, c.extra), ...layerNames(1, c.extra), 'model.norm.weight',
        ...(c.config.tiedEmbeddings ? [] : ['lm_head.weight']),
      ];
      assert.deepEqual([...m.weights.keys()].sort(), expectedNames.sort());
      const q = c.config.numHeads * c.config.headDim;
      const kv = c.config.numKvHeads * c.config.headDim;
      assert.deepEqual(m.weights.get('model.embed_tokens.weight')!.shape, [V, 32]);
      assert.deepEqual(m.weights.get('model.layers.1.self_attn.q_proj.weight')!.shape, [q, 32]);
      assert.deepEqual(m.weights.get('model.layers.1.self_attn.k_proj.weight')!.shape, [kv, 32]);
      assert.deepEqual(m.weights.get('model.layers.1.self_attn.o_proj.weight')!.shape, [32, q]);
      assert.deepEqual(m.weights.get('model.layers.0.mlp.down_proj.weight')!.shape, [32, 64]);
      // Every imported tensor is exactly what the file holds.
      const onDisk = await allTensors(base[c.key]!);
      for (const [name, t] of m.weights) {
        assert.deepEqual(t.shape, onDisk.get(name)!.shape, name);
        assert.ok(Buffer.from(t.data.buffer).equals(Buffer.from(onDisk.get(name)!.data.buffer)), name);
      }
      const norm = m.weights.get('model.norm.weight')!.data;
      assert.ok(norm.every((x) => Math.abs(x - 1) < 0.2), 'norm weights ≈ 1');
      assert.deepEqual(m.manifest.specialTokens, { bos: c.bos, eos: [151645, 151643] });
      assert.equal(m.manifest.addBos, c.addBos);
      assert.equal(m.manifest.chatTemplate, QWEN_TEMPLATE);
      assert.equal(m.manifest.source.kind, 'hf');
      assert.equal(m.manifest.source.path, base[c.key]);
      assert.match(m.manifest.source.sha256, /^[0-9a-f]{64}$/);
      assert.equal(m.manifest.name, `base-${c.key}`);
      assert.equal(m.manifest.dtype, 'float32');
      assert.equal((m.tokenizerJson as { model: { type: string } }).model.type, 'BPE');
      assert.equal(m.tokenizerConfig.eos_token, '<|im_end|>');
    });
  }

  it('drops rotary_emb.inv_freq and a duplicate lm_head of a tied checkpoint', async () => {
    const onDisk = await allTensors(base.llama!);
    assert.ok(onDisk.has('model.layers.0.self_attn.rotary_emb.inv_freq'));
    const dir = path.join(root, 'tied-with-head');
    await writeSyntheticCheckpoint(dir, { family: 'qwen3', dtype: 'BF16', tied: false, configOverrides: { tie_word_embeddings: true } });
    const m = await importHuggingFace(dir);
    assert.equal(m.manifest.config.tiedEmbeddings, true);
    assert.equal(m.weights.has('lm_head.weight'), false);
  });

  it('hashes content, not location: the same checkpoint elsewhere has the same sha256', async () => {
    const copy = path.join(root, 'copy-of-qwen2');
    await cp(base.qwen2!, copy, { recursive: true });
    const [a, b] = await Promise.all([importHuggingFace(base.qwen2!), importHuggingFace(copy)]);
    assert.equal(a.manifest.source.sha256, b.manifest.source.sha256);
    await writeSyntheticCheckpoint(copy, { ...specs.qwen2!, seed: 99 });
    assert.notEqual((await importHuggingFace(copy)).manifest.source.sha256, a.manifest.source.sha256);
  });
});

describe('hashFiles', () => {
  it('is the sha256 of the per-file digests, sensitive to order and boundaries', async () => {
    const dir = path.join(root, 'hash');
    await mkdir(dir, { recursive: true });
    const f = (n: string, s: string) => writeFile(path.join(dir, n), s).then(() => path.join(dir, n));
    const [ab, c, a, bc] = await Promise.all([f('ab', 'ab'), f('c', 'c'), f('a', 'a'), f('bc', 'bc')]);
    const sha = (s: string) => createHash('sha256').update(s).digest('hex');
    assert.equal(await hashFiles([ab]), sha(`${sha('ab')}\n`));
    assert.notEqual(await hashFiles([ab, c]), await hashFiles([a, bc]));
    assert.notEqual(await hashFiles([ab, c]), await hashFiles([c, ab]));
    await rejectsWith(hashFiles([path.join(dir, 'missing')]), 'missing');
  });
});

describe('importHuggingFace: tokenizer files', () => {
  it('picks "default" from a list of chat templates, or reads chat_template.jinja', async () => {
    const dir = path.join(root, 'templates');
    await cp(base.qwen2!, dir, { recursive: true });
    const tcFile = path.join(dir, 'tokenizer_config.json');
    const tc = JSON.parse(await readFile(tcFile, 'utf8')) as Record<string, unknown>;
    await writeFile(tcFile, JSON.stringify({ ...tc, chat_template: [{ name: 'tool_use', template: 'T' }, { name: 'default', template: 'D' }] }));
    assert.equal((await importHuggingFace(dir)).manifest.chatTemplate, 'D');
    delete tc.chat_template;
    await writeFile(tcFile, JSON.stringify(tc));
    assert.equal((await importHuggingFace(dir)).manifest.chatTemplate, null);
    await writeFile(path.join(dir, 'chat_template.jinja'), 'J');
    assert.equal((await importHuggingFace(dir)).manifest.chatTemplate, 'J');
  });

  it('works without tokenizer_config.json and generation_config.json', async () => {
    const dir = path.join(root, 'no-tc');
    await cp(base.mistral!, dir, { recursive: true });
    await rm(path.join(dir, 'tokenizer_config.json'));
    await rm(path.join(dir, 'generation_config.json'));
    const m = await importHuggingFace(dir);
    assert.deepEqual(m.manifest.specialTokens, { bos: 151643, eos: [151645] });
    assert.equal(m.manifest.addBos, true);
    assert.equal(m.manifest.chatTemplate, null);
    assert.deepEqual(m.tokenizerConfig, { add_bos_token: true });
  });

  it('requires a parseable tokenizer.json that fits vocab_size and knows the special tokens', async () => {
    const dir = path.join(root, 'bad-tok');
    await cp(base.qwen2!, dir, { recursive: true });
    const tokFile = path.join(dir, 'tokenizer.json');
    const tcFile = path.join(dir, 'tokenizer_config.json');
    const tc = await readFile(tcFile, 'utf8');
    const small = path.join(root, 'small-vocab');
    await writeSyntheticCheckpoint(small, { family: 'qwen3', dtype: 'BF16', tied: true, vocab: 151000 });
    await rejectsWith(importHuggingFace(small), 'token id 151668', 'vocab_size is 151000', 'tokenizer.json');
    await writeFile(tcFile, JSON.stringify({ ...JSON.parse(tc), eos_token: '<|no-such-token|>' }));
    await rejectsWith(importHuggingFace(dir), 'eos_token', '<|no-such-token|>', 'tokenizer_config.json');
    await writeFile(tcFile, tc);
    await writeFile(tokFile, '{"model": ');
    await rejectsWith(importHuggingFace(dir), 'tokenizer.json is not valid JSON', 'tokenizer.json');
    await rm(tokFile);
    await rejectsWith(importHuggingFace(dir), 'cannot read tokenizer.json', 'tokenizer.json');
  });
});

describe('importHuggingFace: bad weights', () => {
  /** A copy of base `key` whose weights were rewritten by `edit` (single-file F32/BF16 → F32). */
  async function edited(name: string, key: string, edit: (t: Record<string, TensorToWrite>) => void): Promise<string> {
    const dir = path.join(root, name);
    await cp(base[key]!, dir, { recursive: true });
    const tensors: Record<string, TensorToWrite> = {};
    for (const [k, v] of await readSafetensors(path.join(dir, 'model.safetensors'))) tensors[k] = { dtype: 'F32', ...v };
    edit(tensors);
    await writeSafetensors(path.join(dir, 'model.safetensors'), tensors);
    return dir;
  }

  it('rejects a missing tensor, naming it and the file', async () => {
    const dir = await edited('missing-tensor', 'mistral', (t) => delete t['model.layers.1.mlp.up_proj.weight']);
    await rejectsWith(importHuggingFace(dir), 'tensor model.layers.1.mlp.up_proj.weight is missing', 'model.safetensors');
  });

  it('rejects a tensor of the wrong shape, quoting expected and found', async () => {
    const dir = await edited('wrong-shape', 'mistral', (t) => {
      t['model.layers.0.self_attn.k_proj.weight']!.shape = [32, 16];
    });
    await rejectsWith(importHuggingFace(dir), 'tensor model.layers.0.self_attn.k_proj.weight expected shape [16, 32], found [32, 16]', 'model.safetensors');
  });

  it('rejects an untied config whose lm_head is missing', async () => {
    const dir = path.join(root, 'no-head');
    await writeSyntheticCheckpoint(dir, { family: 'qwen2', dtype: 'BF16', tied: true, configOverrides: { tie_word_embeddings: false } });
    await rejectsWith(importHuggingFace(dir), 'tensor lm_head.weight is missing');
  });

  it('rejects a tensor missing from the sharded index, and a missing shard', async () => {
    const dir = path.join(root, 'bad-index');
    await cp(base.qwen3!, dir, { recursive: true });
    const indexFile = path.join(dir, 'model.safetensors.index.json');
    const index = JSON.parse(await readFile(indexFile, 'utf8')) as { weight_map: Record<string, string> };
    delete index.weight_map['model.layers.1.self_attn.k_norm.weight'];
    await writeFile(indexFile, JSON.stringify(index));
    await rejectsWith(importHuggingFace(dir), 'tensor model.layers.1.self_attn.k_norm.weight is missing', 'model.safetensors.index.json');
    await rm(path.join(dir, 'model-00002-of-00002.safetensors'));
    await rejectsWith(importHuggingFace(dir), 'cannot open', 'model-00002-of-00002.safetensors');
  });

  it('rejects a truncated shard, an unsupported dtype, and a folder without weights', async () => {
    const dir = path.join(root, 'trunc');
    await cp(base.qwen3!, dir, { recursive: true });
    const shard = path.join(dir, 'model-00002-of-00002.safetensors');
    await truncate(shard, (await stat(shard)).size - 10);
    await rejectsWith(importHuggingFace(dir), 'truncated', 'model-00002-of-00002.safetensors');

    const f64 = await edited('f64', 'mistral', () => {});
    const tensors = await readSafetensors(path.join(f64, 'model.safetensors'));
    const header: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    let off = 0;
    for (const [k, t] of tensors) {
      const f64ize = k === 'model.norm.weight';
      const buf = f64ize ? Buffer.from(Float64Array.from(t.data).buffer) : Buffer.from(t.data.buffer);
      header[k] = { dtype: f64ize ? 'F64' : 'F32', shape: t.shape, data_offsets: [off, off + buf.length] };
      chunks.push(buf);
      off += buf.length;
    }
    await writeFile(path.join(f64, 'model.safetensors'), rawSafetensors(header, Buffer.concat(chunks)));
    await rejectsWith(importHuggingFace(f64), 'tensor "model.norm.weight" has dtype F64', 'model.safetensors');

    await rm(path.join(f64, 'model.safetensors'));
    await rejectsWith(importHuggingFace(f64), 'no model.safetensors or model.safetensors.index.json');
  });
});

describe('importHuggingFace: bad config.json fails before anything else is read', () => {
  /** A folder holding only config.json: any error but the config's would be about missing files. */
  async function configOnly(name: string, config: Record<string, unknown>): Promise<string> {
    const dir = path.join(root, name);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'config.json'), JSON.stringify(config));
    return dir;
  }
  const good = { model_type: 'llama', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 1000 };

  it('rejects an unsupported model_type, listing the supported ones', async () => {
    const dir = await configOnly('gpt2', { ...good, model_type: 'gpt2' });
    await rejectsWith(importHuggingFace(dir), 'unsupported model_type "gpt2"; supported: llama, mistral, qwen2, qwen3', 'config.json');
  });

  it('rejects absurd sizes without allocating any weights', async () => {
    const { largestBytes } = await countAllocations(async () => {
      await rejectsWith(importHuggingFace(await configOnly('huge-hidden', { ...good, hidden_size: 1e9 })), 'hidden_size 1000000000', 'config.json');
      await rejectsWith(
        importHuggingFace(await configOnly('huge-embed', { ...good, hidden_size: 65536, num_attention_heads: 512, vocab_size: 4_000_000 })),
        'model.embed_tokens.weight', 'elements',
      );
      await rejectsWith(
        importHuggingFace(await configOnly('huge-total', { ...good, hidden_size: 16384, intermediate_size: 65536, num_hidden_layers: 1000, num_attention_heads: 128 })),
        'parameters', 'GiB',
      );
    });
    // The smallest absurd tensor above is 4 GB; a config file and a tokenizer read take well under 16 MiB.
    assert.ok(largestBytes < 16 * 2 ** 20, `largest allocation ${largestBytes} bytes: weights were allocated`);
  });

  it('rejects missing or ill-typed fields and a missing or unparseable config.json', async () => {
    await rejectsWith(importHuggingFace(await configOnly('str-hidden', { ...good, hidden_size: '64' })), 'hidden_size', 'config.json');
    const { vocab_size: _, ...noVocab } = good;
    await rejectsWith(importHuggingFace(await configOnly('no-vocab', noVocab)), 'vocab_size', 'config.json');
    const empty = path.join(root, 'empty');
    await mkdir(empty, { recursive: true });
    await rejectsWith(importHuggingFace(empty), 'cannot read config.json', 'config.json');
    await writeFile(path.join(empty, 'config.json'), '{');
    await rejectsWith(importHuggingFace(empty), 'config.json is not valid JSON');
  });
});
