/**
 * Import of a Hugging Face checkpoint folder (Llama / Mistral / Qwen2 / Qwen3 / … ; gpt-oss's
 * stacked experts through gpt-oss-hf.ts) into the canonical
 * `ImportedModel`. The folder holds:
 *   config.json                       required; validated with zod, mapped to `ModelConfig`
 *   model.safetensors                 or model.safetensors.index.json (`weight_map`) + shards;
 *                                     F32 / F16 / BF16, converted to float32
 *   tokenizer.json                    required (Hugging Face fast tokenizer)
 *   tokenizer_config.json             optional: chat_template, bos/eos tokens, add_bos_token
 *   chat_template.jinja               optional: the template when tokenizer_config has none
 *   generation_config.json            optional: eos_token_id
 *
 * config.json is mapped by hf-config.ts (`parseHfConfig`, `expectedWeights`, re-exported here).
 *
 * Order of work, cheapest first, so a bad folder fails before gigabytes are read: config (with
 * size limits, `HF_LIMITS`), safetensors headers (every expected tensor present with its
 * expected shape), tokenizer files, then tensor data one tensor at a time, then the content hash.
 * A streamed import (`openHuggingFace`) only checks that tokenizer.json can be read before the
 * weights; the bundle writer parses it once, after the weights, checks it against the config and
 * finds the special tokens (`checkTokenizerJson`), and copies it as it is: its text and parsed
 * form (measured 21 MB of heap for Qwen's 11 MB file, plus the text as a two-byte string) are
 * never held while the weights are written, and the engine gets that one parse instead of
 * reading the bundle's copy again.
 *
 * Sliding window (`parseSlidingWindow`): `sliding_window` with, as transformers reads them,
 * `use_sliding_window` / `max_window_layers` (Qwen2, Qwen3) or `layer_types`, becomes
 * `ModelConfig.slidingWindow` per layer; one that cannot be mapped is refused, never dropped.
 * Deliberately ignored: a `sliding_window` in a `llama`
 * config (LlamaConfig has none; transformers ignores it too), and tensors the graph does not use
 * (`rotary_emb.inv_freq`, a duplicate `lm_head.weight` in a tied checkpoint).
 */
import { constants } from 'node:fs';
import { access, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ModelLoadError } from '../errors.ts';
import { hashFiles } from './content-hash.ts';
import {
  isQuantized,
  type BundleWeights,
  type ImportedModel,
  type LazyTensor32,
  type ModelConfig,
  type ModelWeights,
  type OpenedModel,
  type TokenizerFacts,
  type WeightSources,
} from './manifest.ts';
import { openSafetensors, type SafetensorsFile } from './safetensors.ts';
import { expectedWeights, parseHfConfig, tokenId, zodMessage } from './hf-config.ts';
import { gptOssCanonicalSources, gptOssHfTensors } from './gpt-oss-hf.ts';

export { expectedWeights, HF_LIMITS, parseHfConfig, SUPPORTED_MODEL_TYPES } from './hf-config.ts';

// ---- files -------------------------------------------------------------------------------------

/** Text of `file`, or null when it does not exist and `required` is false. */
async function readText(file: string, required: boolean): Promise<string | null> {
  try {
    // One native UTF-8 decode of the whole file: readFile(file, 'utf8') decodes it piece by piece,
    // measured 70–120 ms against 10 ms for an 11 MB tokenizer.json.
    return (await readFile(file)).toString('utf8');
  } catch (e) {
    if (!required && (e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ModelLoadError(`cannot read ${path.basename(file)}: ${(e as Error).message}`, file, { cause: e });
  }
}

/** Parsed JSON of `file`, or null when it does not exist and `required` is false. */
async function readJson(file: string, required: boolean): Promise<unknown> {
  const text = await readText(file, required);
  return text === null ? null : parseJson(text, file);
}

/**
 * `text` parsed as JSON.
 * @param file the file it came from, named in the error.
 * @throws ModelLoadError when it is not valid JSON.
 */
export function parseJson(text: string, file: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelLoadError(`${path.basename(file)} is not valid JSON: ${(e as Error).message}`, file, { cause: e });
  }
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(() => true, () => false);
}

const TokenizerJsonSchema = z.looseObject({
  added_tokens: z.array(z.looseObject({ id: tokenId, content: z.string() })).default([]),
  // The vocabulary (~150k entries) is checked by hand below: zod would take ~300 ms over it.
  model: z.looseObject({ vocab: z.unknown() }),
});
const TokenString = z.union([z.string(), z.looseObject({ content: z.string() })]).nullish();
const TokenizerConfigSchema = z.looseObject({
  chat_template: z.union([z.string(), z.array(z.looseObject({ name: z.string(), template: z.string() }))]).nullish(),
  bos_token: TokenString,
  eos_token: TokenString,
  add_bos_token: z.boolean().nullish(),
});
const GenerationConfigSchema = z.looseObject({ eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish() });

function parseWith<T>(schema: z.ZodType<T>, json: unknown, file: string): T {
  const r = schema.safeParse(json);
  if (!r.success) throw new ModelLoadError(`invalid ${path.basename(file)}: ${zodMessage(r.error)}`, file);
  return r.data;
}

const asList = (v: number | number[] | null | undefined): number[] => (v == null ? [] : Array.isArray(v) ? v : [v]);

type HfTokenIds = { bos_token_id?: number | null; eos_token_id?: number | number[] | null };

/**
 * The tokenizer files besides tokenizer.json read (tokenizer_config.json, generation_config.json,
 * chat_template.jinja), and tokenizer.json checked to be readable; its content is checked later
 * by the returned `check` (`checkTokenizerJson`).
 */
async function readTokenizerFiles(folder: string, config: ModelConfig, hf: HfTokenIds) {
  const tokFile = path.join(folder, 'tokenizer.json');
  const tcFile = path.join(folder, 'tokenizer_config.json');
  const genFile = path.join(folder, 'generation_config.json');
  const jinjaFile = path.join(folder, 'chat_template.jinja');
  await access(tokFile, constants.R_OK).catch((e: Error) => {
    throw new ModelLoadError(`cannot read tokenizer.json: ${e.message}`, tokFile, { cause: e });
  });
  const tcRaw = (await readJson(tcFile, false)) as Record<string, unknown> | null;
  const tc = tcRaw === null ? null : parseWith(TokenizerConfigSchema, tcRaw, tcFile);
  const genRaw = await readJson(genFile, false);
  const gen = genRaw === null ? null : parseWith(GenerationConfigSchema, genRaw, genFile);
  const jinja = await readText(jinjaFile, false);
  const ct = tc?.chat_template;
  // A list of named templates: "default" is the chat one (others are e.g. "tool_use", "rag").
  const chatTemplate = (Array.isArray(ct) ? (ct.find((t) => t.name === 'default') ?? ct[0])?.template : ct) ?? jinja ?? null;
  const addBos = tc?.add_bos_token ?? ['llama', 'mistral', 'gemma2', 'gemma3'].includes(config.architecture);
  const tokenizerConfig = tcRaw ?? { add_bos_token: addBos };
  const check = (json: unknown): TokenizerFacts => checkTokenizerJson(json, { folder, config, hf, tc, gen, addBos });
  return { tokenizerFile: tokFile, tokenizerConfig, chatTemplate, addBos, check };
}

/**
 * Checks a parsed tokenizer.json against the model: every token id below config.json's
 * vocab_size, and the special tokens resolved (BOS = tokenizer_config `bos_token` looked up in
 * tokenizer.json, else config.json `bos_token_id`; EOS = union of config.json and
 * generation_config.json `eos_token_id` and tokenizer_config's `eos_token`).
 * @throws ModelLoadError naming the file for an ill-formed tokenizer.json, a token id outside
 *   vocab_size, a special token that is not in the vocabulary, or add_bos_token without a BOS.
 */
function checkTokenizerJson(
  tokenizerJson: unknown,
  m: {
    folder: string;
    config: ModelConfig;
    hf: HfTokenIds;
    tc: z.infer<typeof TokenizerConfigSchema> | null;
    gen: z.infer<typeof GenerationConfigSchema> | null;
    addBos: boolean;
  },
): TokenizerFacts {
  const { config, hf, tc, gen, addBos } = m;
  const tokFile = path.join(m.folder, 'tokenizer.json');
  const tcFile = path.join(m.folder, 'tokenizer_config.json');
  const tok = parseWith(TokenizerJsonSchema, tokenizerJson, tokFile);
  // model.vocab: { piece: id } (BPE, WordPiece, WordLevel) or [[piece, score], …] (Unigram: id = index).
  const vocab = tok.model.vocab;
  let maxId = tok.added_tokens.reduce((a, t) => Math.max(a, t.id), -1);
  if (Array.isArray(vocab)) {
    maxId = Math.max(maxId, vocab.length - 1);
  } else if (typeof vocab === 'object' && vocab !== null) {
    // for…in over the ~150k pieces: Object.values first copies them into an array, measured
    // 1.5–4× slower here.
    const ids = vocab as Record<string, unknown>;
    for (const piece in ids) {
      const id = ids[piece];
      if (!Number.isSafeInteger(id) || (id as number) < 0) throw new ModelLoadError(`model.vocab holds a bad token id ${JSON.stringify(id)}`, tokFile);
      if ((id as number) > maxId) maxId = id as number;
    }
  } else if (vocab !== undefined) {
    throw new ModelLoadError('model.vocab is neither an object nor a list', tokFile);
  }
  if (maxId >= config.vocabSize) {
    throw new ModelLoadError(`tokenizer.json has token id ${maxId} but config.json vocab_size is ${config.vocabSize}`, tokFile);
  }
  const lookup = (t: z.infer<typeof TokenString>, field: string): number | null => {
    if (t == null) return null;
    const s = typeof t === 'string' ? t : t.content;
    const added = tok.added_tokens.find((a) => a.content === s);
    const inVocab = Array.isArray(vocab)
      ? vocab.findIndex((e) => Array.isArray(e) && e[0] === s)
      : vocab && Object.hasOwn(vocab, s) ? (vocab as Record<string, number>)[s]! : -1;
    const id = added?.id ?? inVocab;
    if (id < 0) throw new ModelLoadError(`${field} ${JSON.stringify(s)} is not a token in tokenizer.json`, tcFile);
    return id;
  };
  const bos = lookup(tc?.bos_token, 'bos_token') ?? hf.bos_token_id ?? null;
  const eosTc = lookup(tc?.eos_token, 'eos_token');
  const eos = [...new Set([...asList(hf.eos_token_id), ...asList(gen?.eos_token_id), ...(eosTc === null ? [] : [eosTc])])];
  for (const id of [...eos, ...(bos === null ? [] : [bos])]) {
    if (id >= config.vocabSize) throw new ModelLoadError(`special token id ${id} is outside vocab_size ${config.vocabSize}`, path.join(m.folder, 'config.json'));
  }
  if (addBos && bos === null) throw new ModelLoadError('add_bos_token is set but no BOS token is defined', tcFile);
  return { specialTokens: { bos, eos }, addBos };
}

const IndexSchema = z.looseObject({ weight_map: z.record(z.string(), z.string()) });

interface OpenWeights {
  /** Every expected tensor, read (as float32) from its shard when loaded; valid until `close`. */
  sources: ReadonlyMap<string, LazyTensor32>;
  close(): Promise<void>;
}

/**
 * Gemma's norm weights as their effective multipliers: transformers' GemmaRMSNorm computes
 * x̂ · (1 + w) in float32 (`modeling_gemma2.py`), so every `*norm.weight` gets 1 added (in float32,
 * as it is read: the same bits as transformers' sum), which is also how llama.cpp's converter
 * stores them in GGUF; the graph's norm is then the plain x̂ · w.
 */
function withNormOffset(sources: ReadonlyMap<string, LazyTensor32>): ReadonlyMap<string, LazyTensor32> {
  const plusOne = (a: Float32Array) => {
    for (let i = 0; i < a.length; i++) a[i] += 1;
    return a;
  };
  const out = new Map<string, LazyTensor32>();
  for (const [name, t] of sources) {
    if (!/norm\.weight$/.test(name)) out.set(name, t);
    else {
      out.set(name, {
        shape: t.shape,
        load: async () => plusOne(await t.load()),
        chunks: async function* (elements) {
          for await (const part of t.chunks(elements)) yield plusOne(part);
        },
      });
    }
  }
  return out;
}


/**
 * Opens the weight files and checks, from their headers only, that every expected tensor is
 * present with its expected shape. Tensor data is read later by `load`.
 */
async function openWeights(folder: string, expected: Map<string, number[]>): Promise<OpenWeights> {
  const indexFile = path.join(folder, 'model.safetensors.index.json');
  const single = path.join(folder, 'model.safetensors');
  const index = await readJson(indexFile, false);
  let whereIs = (_name: string) => 'model.safetensors';
  let shardNames = ['model.safetensors'];
  if (index !== null) {
    const map = parseWith(IndexSchema, index, indexFile).weight_map;
    shardNames = [...new Set(Object.values(map))].sort();
    const bad = shardNames.find((s) => s !== path.basename(s) || s === '..' || s === '.');
    if (bad !== undefined) throw new ModelLoadError(`weight_map names shard ${JSON.stringify(bad)} outside the folder`, indexFile);
    whereIs = (name) => map[name] ?? '';
  } else if (!(await exists(single))) {
    throw new ModelLoadError('no model.safetensors or model.safetensors.index.json in the folder', folder);
  }
  const shards = new Map<string, SafetensorsFile>();
  const close = async () => {
    for (const s of shards.values()) await s.close();
  };
  try {
    for (const s of shardNames) shards.set(s, await openSafetensors(path.join(folder, s)));
    for (const [name, shape] of expected) {
      const shard = shards.get(whereIs(name));
      const entry = shard?.entries.get(name);
      if (!shard || !entry) {
        throw new ModelLoadError(`tensor ${name} is missing`, shard ? shard.file : index !== null ? indexFile : single);
      }
      if (entry.shape.length !== shape.length || entry.shape.some((d, i) => d !== shape[i])) {
        throw new ModelLoadError(`tensor ${name} expected shape [${shape.join(', ')}], found [${entry.shape.join(', ')}]`, shard.file);
      }
    }
  } catch (e) {
    await close();
    throw e;
  }
  const sources = new Map<string, LazyTensor32>();
  for (const [name, shape] of expected) {
    const shard = shards.get(whereIs(name))!;
    sources.set(name, { shape, load: async () => (await shard.load(name)).data, chunks: (elements) => shard.chunks(name, elements) });
  }
  return { sources, close };
}

/**
 * The files whose contents identify a Hugging Face checkpoint folder, sorted by name: config.json,
 * generation_config.json, chat_template.jinja, tokenizer*, *.safetensors and the index. The import
 * cache keys on their hash (`hashFiles`), and so does `manifest.source.sha256`.
 */
export async function hfSourceFiles(folder: string): Promise<string[]> {
  const wanted = (e: string) =>
    e === 'config.json' ||
    e === 'generation_config.json' ||
    e === 'chat_template.jinja' ||
    e.startsWith('tokenizer') ||
    e.endsWith('.safetensors') ||
    e.endsWith('.safetensors.index.json');
  return (await readdir(folder)).sort().filter(wanted).map((e) => path.join(folder, e));
}

/**
 * Imports a Hugging Face checkpoint folder. Weights come back as float32 under canonical names
 * with shapes checked against the config; `manifest.source` is `{ kind: 'hf', path: <absolute
 * folder>, sha256 }`, sha256 being the hash of `hfSourceFiles(folder)`.
 * Special tokens: BOS = tokenizer_config `bos_token` looked up in tokenizer.json, else
 * config.json `bos_token_id`; EOS = union of config.json and generation_config.json
 * `eos_token_id` and tokenizer_config's `eos_token`. addBos = `add_bos_token` ?? (llama/mistral).
 * Chat template: tokenizer_config `chat_template` (a string, or the list entry named "default",
 * else its first), else chat_template.jinja, else null.
 * @param opts.sourceHash the caller's content hash of the folder, when it has one already
 *   (the import cache hashes before importing); skips hashing the weights a second time.
 * @throws ModelLoadError naming the file (and tensor) for anything missing, malformed,
 *   unsupported or over `HF_LIMITS`.
 */
export async function importHuggingFace(folder: string, opts: { sourceHash?: string } = {}): Promise<ImportedModel<ModelWeights>> {
  // Every weight of a Hugging Face checkpoint is float32 (`openHuggingFace`'s sources are LazyTensor32).
  return (await readOpenedModel(await openHuggingFace(folder, opts))) as ImportedModel<ModelWeights>;
}

/**
 * An opened model read whole into memory, then closed: lazy float weights loaded, in-memory ones
 * (float or quantized) as they are, tokenizer.json read and checked when it is a file (which fills
 * in the manifest's special tokens). The in-memory imports (`importHuggingFace`, `importGguf`) for
 * tests and tools; the bundle writer streams the opened model instead.
 * @throws ModelLoadError as the source's reads and checks; for a weight quantized while written
 *   (`LazyQuantizedTensor`), which has no in-memory form.
 */
export async function readOpenedModel(opened: OpenedModel): Promise<ImportedModel> {
  try {
    const { close: _close, tokenizer, weights: sources, ...rest } = opened;
    const tokenizerJson = 'file' in tokenizer ? await readJson(tokenizer.file, true) : tokenizer.json;
    if ('file' in tokenizer) Object.assign(rest.manifest, tokenizer.check(tokenizerJson));
    const weights: BundleWeights = new Map();
    for (const [name, w] of sources) {
      if ('data' in w) weights.set(name, w);
      else if (isQuantized(w)) throw new ModelLoadError(`weight ${name} is quantized while written; it has no in-memory form`);
      else weights.set(name, { shape: w.shape, data: await w.load() });
    }
    return { ...rest, weights, tokenizerJson };
  } finally {
    await opened.close();
  }
}

/**
 * `importHuggingFace` without reading the weights or tokenizer.json: config, headers (every tensor
 * present with its shape) and the other tokenizer files are checked now; tensor data is read
 * when each lazy weight is loaded or read in chunks, and tokenizer.json is a file with its
 * `check` (`TokenizerJsonSource`): `writeBundle` streams the weights, then parses and checks the
 * tokenizer, which fills in `manifest.specialTokens` (until then BOS null, no EOS). The caller
 * must `close()` it.
 * @throws ModelLoadError as `importHuggingFace`.
 */
export async function openHuggingFace(folder: string, opts: { sourceHash?: string } = {}): Promise<OpenedModel<ReadonlyMap<string, LazyTensor32>>> {
  const root = path.resolve(folder);
  const configFile = path.join(root, 'config.json');
  const rawConfig = await readJson(configFile, true);
  const config = parseHfConfig(rawConfig, configFile);
  const hf = rawConfig as { bos_token_id?: number | null; eos_token_id?: number | number[] | null };
  const expected = expectedWeights(config);
  const gptOss = config.architecture === 'gpt-oss';
  const opened = await openWeights(root, gptOss ? gptOssHfTensors(config, expected) : expected);
  if (config.gemma) opened.sources = withNormOffset(opened.sources);
  if (gptOss) opened.sources = gptOssCanonicalSources(opened.sources, config, expected);
  try {
    const tok = await readTokenizerFiles(root, config, hf);
    const sha256 = opts.sourceHash ?? (await hashFiles(await hfSourceFiles(root)));
    return {
      manifest: {
        format: 'ropewalk-bundle',
        version: 1,
        name: path.basename(root),
        source: { kind: 'hf', path: root, sha256 },
        config,
        specialTokens: { bos: null, eos: [] },
        addBos: tok.addBos,
        chatTemplate: tok.chatTemplate,
        dtype: 'float32',
      },
      weights: opened.sources,
      tokenizer: { file: tok.tokenizerFile, check: tok.check },
      tokenizerConfig: tok.tokenizerConfig,
      close: opened.close,
    };
  } catch (e) {
    await opened.close();
    throw e;
  }
}
