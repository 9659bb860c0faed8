/**
 * The engine: one loaded model (decoder backend, tokenizer, RoPE cache, KV cache) and the
 * generation loop. Token ids in, token ids and text out. Model-level verbs, as in
 * onnxruntime-genai's ComputeLogits / GenerateNextToken:
 *   - `prefill(tokenIds)`: runs tokens at the next positions, returns the last one's logits;
 *   - `decodeStep(tokenId)`: feeds one sampled token back, returns the next logits;
 * and `generate(request, { signal })`, the loop that orchestrates them: prefix reuse, chunked
 * prefill, then sample → accept → decode step until a finish reason. It remembers which tokens
 * its KV cache holds, so a follow-up prompt that extends the previous sequence prefills only
 * what differs (prefix reuse).
 *
 * `generate` is an async generator of `GenerationEvent`s:
 *   prefill progress per chunk → token deltas → one `done` with reason and stats.
 * A chat reply of a reasoning model (markers from its template and vocabulary, reasoning.ts) is
 * split into reasoning and content: each token delta says its part, `done` has both texts.
 * Out of positions, a generation ends with 'context-full', or, when the request allows it
 * (`contextShift`), shifts the context and goes on (`makeRoom`, context-shift.ts), keeping the
 * prefix the request names (the system prompt, or the system prompt and the first exchange).
 * A user abort ends with `done { reason: 'cancelled' }`; a prompt that cannot fit throws
 * `ContextOverflowError` before anything is touched.
 *
 * Switching between conversations: before a prompt is prefilled, the engine looks for the
 * sequence that shares the longest prefix with it among the live KV cache and the KV caches it
 * kept of earlier sequences (compact host copies, `kvCacheBudgetBytes`, least recently used
 * dropped first). The live one is kept when the new prompt would overwrite most of it; a kept
 * one that beats the live cache is copied back in. So coming back to a long document costs a
 * copy, not a prefill. The engine knows nothing of conversations: sequences are matched by their
 * token ids.
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ContextOverflowError, InvalidOptionError, SessionRunError } from '../errors.ts';
import { MAX_CONTEXT_LIMIT } from '../cache/growth.ts';
import { KvCache } from '../cache/kv-cache.ts';
import { commonPrefix, DEFAULT_KV_CACHE_BUDGET_BYTES, KeptKvCaches } from '../cache/kv-keep.ts';
import { windowGroup } from '../cache/kv-window.ts';
import { RopeCache } from '../cache/rope-cache.ts';
import type { BackendKind, DecoderBackend, ExecutionProvider, ExecutionProviderChoice, SessionInfo } from '../model/backend.ts';
import { MAX_THREADS } from '../model/backend.ts';
import { chooseExecutionProvider, parseExecutionProvider, type ProviderProbe } from '../model/ep-choice.ts';
import { DEFAULT_KV_CACHE_DTYPE, engineGraphTarget, validateKvDtype, type GraphDtype } from '../model/graph-target.ts';
import { nativeKernelsAvailable } from '../model/native-addon.ts';
import { resolveModel, type ImportProgress, type QuantizeOption } from '../model/bundle.ts';
import { manifestKvDtype, type ModelManifest } from '../model/manifest.ts';
import { availableMemory, bundleBytes, checkMemory, estimateMemory, weightsQuantized } from '../model/memory.ts';
import { openDecoderBackend } from '../model/open-backend.ts';
import { tokenLogprob, type TokenLogprob } from '../sampling/logprobs.ts';
import { Sampler, SamplerScratch, validateSamplerOptions } from '../sampling/sampler.ts';
import { probeChatTemplate, templateOrigin } from '../tokenizer/chat-template.ts';
import { prestartTemplateSandbox } from '../tokenizer/template-sandbox.ts';
import { TextTokenizer } from '../tokenizer/tokenizer.ts';
import { ContextShifter } from './context-shift.ts';
import { Generation } from './generation.ts';
import { detectToolFormat, type ToolFormat } from '../tokenizer/tool-format.ts';
import { promptOpensReasoning, reasoningMarkers, writtenReply, type PartDelta, type ReasoningMarkers, type ReplyPart } from './reasoning.ts';
import type { GenerationEvent, GenerationRequest, GenerationStats } from './types.ts';

export interface EngineOptions {
  /** Bound on positions (prompt + generated); default: the model's trained context. */
  maxContext?: number;
  /** Execution provider, or 'auto' (model/ep-choice.ts); default 'cpu' here, 'auto' in the CLI, window and serve. */
  executionProvider?: ExecutionProviderChoice;
  /** How 'auto', 'webgpu' and 'cuda' look at the machine (tests inject one; default: this machine). */
  providerProbe?: ProviderProbe;
  /**
   * Activation and KV-cache dtype of the graph to load (graph-target.ts `engineGraphTarget`):
   * default float32 (cuda: the CPU graph, for now); 'float16' loads the float16 graph, on the cpu
   * EP too (ONNX Runtime casts its float16 nodes without CPU kernels to float32 itself).
   */
  graphDtype?: GraphDtype;
  /**
   * The KV cache's element type on the CPU graphs (graph-target.ts `GraphTarget.kvDtype`), default
   * `DEFAULT_KV_CACHE_DTYPE`: float16 halves the KV bytes per position (and so the memory the max
   * context needs) and runs the bundle's float16-KV graph (bundle.ts `KV_FLOAT16_MODEL_FILE`; a
   * bundle without one runs float32, with a note); the GPU graphs keep their own (CUDA's float16,
   * WebGPU's float32).
   */
  kvCacheDtype?: GraphDtype;
  /** Decoder backend (default 'native'; falls back to 'js' with a note when the addon cannot load). */
  backend?: BackendKind;
  /**
   * On the native backend's CPU graph, the addon's own quantized matmuls (graph-target.ts
   * `NATIVE_CPU_TARGET`; default true where the addon has them); false builds and loads the
   * MatMulNBits graph the JS backend runs (the benches' before/after).
   */
  nativeKernels?: boolean;
  /**
   * ONNX Runtime's intra-op threads for the CPU work, a whole number 0–1024 (default 0: one per
   * physical core, counted by model/cpu-threads.ts and passed as a number). @see MAX_THREADS
   */
  threads?: number;
  /**
   * Slack of the sliding-window layers' KV cache, positions (cache/kv-window.ts; default
   * max(256, ⌈(W − 1) / 4⌉)); tests and benchmarks set it. Infinity keeps the whole context.
   */
  kvWindowSlack?: number;
  /** Memory for kept KV caches of earlier sequences, bytes (default DEFAULT_KV_CACHE_BUDGET_BYTES). */
  kvCacheBudgetBytes?: number;
  /** Prefill chunk size in tokens (default 256). */
  prefillChunk?: number;
  /** Where imported bundles are cached. */
  cacheDir?: string;
  /** Quantize a float source's Linear weights at import (`q4` / `q8` round-to-nearest blocks). */
  quantize?: QuantizeOption;
  /** Memory the model may use, bytes (default: what the OS reports available); see `checkMemory`. */
  availableMemoryBytes?: number;
  onProgress?: ImportProgress;
  /** Cancels an import in progress (nothing is left in the cache); EngineError('CANCELLED'). */
  signal?: AbortSignal;
}

/** What the host and UI show about the loaded model. */
export interface ModelInfo {
  name: string;
  architecture: string;
  trainedContext: number;
  maxContext: number;
  vocabSize: number;
  backend: BackendKind;
  executionProvider: ExecutionProvider;
  /** Compute nodes ONNX Runtime placed on its CPU provider (SessionInfo.nodesOnCpu), measured at load; null if unknown. */
  nodesOnCpu: number | null;
  /** The GPU's name where it can be had (CUDA: nvidia-smi; WebGPU: the Vulkan device, ep-choice.ts), else null. */
  adapter: string | null;
  /**
   * What differs from what was asked, in one line for the CLI's stderr and the model panel: why
   * the requested backend or execution provider is not the one in use, and why a requested
   * quantization does not apply (`ResolvedBundle.note`); or null.
   */
  fallbackReason: string | null;
  hasChatTemplate: boolean;
  /** The chat template reads `enable_thinking` (Qwen3's), so `GenerationRequest.enableThinking` changes the prompt. */
  thinkingToggle?: boolean;
  /** How the chat template writes tool calls (tokenizer/tool-format.ts); null: it takes no tools. */
  toolFormat: ToolFormat | null;
  bundleDir: string;
  /** How the weights are stored: formats with counts, the bundle's size on disk, resident weight bytes. */
  weights: ModelWeightsInfo;
  /** The KV cache's element type (the KV cache setting on the CPU; a float16 graph's own); absent: a remote engine. */
  kvCacheDtype?: GraphDtype;
  /** The load's memory estimate in parts (memory.ts), so another max context can be judged before a reload; absent: unknown. */
  memory?: LoadMemoryFacts;
}

/** Bytes: the weights as stored, one position's KV and RoPE rows, and the memory available when the load checked. */
export interface LoadMemoryFacts {
  weightBytes: number;
  /** KV bytes per position of the layers that hold every position (all but sliding-window ones). */
  kvBytesPerPosition: number;
  /** Sliding-window layers' KV bytes per position, up to `windowRows` positions (cache/kv-window.ts). */
  windowKvBytesPerPosition?: number;
  windowRows?: number;
  ropeBytesPerPosition: number;
  availableBytes: number;
}

/** Storage of a loaded model's weights (manifest `weights`), for `--json` and the model panel. */
export interface ModelWeightsInfo {
  /** e.g. "q8 (Q8_0) ×36, float32 ×12". */
  formats: string;
  bundleBytes: number;
  residentBytes: number;
}

/** What an engine is built from: a model's manifest and tokenizer and a backend opened on it. */
export interface EngineParts {
  manifest: ModelManifest;
  tokenizer: TextTokenizer;
  backend: DecoderBackend;
  /** The bundle folder (shown in ModelInfo). */
  bundleDir: string;
  /** Why `backend` is not the kind that was asked for, if so. */
  backendNote?: string | null;
  /** What of the load request did not apply to the model (`ResolvedBundle.note`), if anything. */
  importNote?: string | null;
  /** The GPU's name (ModelInfo.adapter), if known. */
  adapter?: string | null;
  /** How the weights are stored (default: unknown, zeros). */
  weights?: ModelWeightsInfo;
  /** The load's memory estimate in parts (ModelInfo.memory), if known. */
  memory?: LoadMemoryFacts;
  /** The KV cache's dtype, the graph the backend runs (default: the manifest's, `manifestKvDtype`). */
  kvDtype?: GraphDtype;
}

/**
 * The graph of `bundle` for a requested KV dtype (null: the bundle's own, off the CPU): float16
 * runs the float16-KV graph beside `model.onnx` where the bundle has one (manifest `kvGraphs`),
 * else the bundle's own graph, with a note where float16 was asked of a float32 bundle without one
 * (written before it); a float16 graph's KV is float16 whatever is asked.
 */
function kvGraph(bundle: { dir: string; modelPath: string; manifest: ModelManifest }, want: GraphDtype | null): { modelPath: string; dtype: GraphDtype; note: string | null } {
  const own = manifestKvDtype(bundle.manifest);
  const file = bundle.manifest.kvGraphs?.float16;
  if (want === 'float16' && own === 'float32' && file) return { modelPath: path.join(bundle.dir, file), dtype: 'float16', note: null };
  // A float16 graph's KV is float16 whatever is asked (the GPU graphs, the CPU test variant): no note.
  const note = want === 'float16' && own === 'float32' ? 'KV cache float16 not available in this bundle (it has no float16-KV graph); using float32' : null;
  return { modelPath: bundle.modelPath, dtype: own, note };
}

/** Notes (null: none) joined into the one line `ModelInfo.fallbackReason` holds, or null when there are none. */
function oneLine(...notes: (string | null)[]): string | null {
  const said = notes.filter((n): n is string => n !== null);
  return said.length ? said.join('; ') : null;
}

/** Validates a thread count (0: the physical cores, counted by cpu-threads.ts). @throws InvalidOptionError quoting it. */
export function validateThreads(n: unknown): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > MAX_THREADS) {
    throw new InvalidOptionError('threads', `${String(n)} is not a whole number from 0 (the physical cores) to ${MAX_THREADS}`);
  }
  return n;
}

/** Validates a max-context value. @throws InvalidOptionError quoting it. */
export function validateMaxContext(n: unknown): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_CONTEXT_LIMIT) {
    throw new InvalidOptionError('max context', `${String(n)} is not an integer between 1 and ${MAX_CONTEXT_LIMIT}`);
  }
  return n;
}

/**
 * One loaded model: decoder backend, tokenizer, RoPE cache [capacity, R/2] float32 ×2 and KV
 * cache [1, Hkv, capacity, headDim] float32 per layer (on the host for the JS backend, in the
 * addon for the native one), both bounded by `maxContext`, plus the token ids the KV cache holds
 * (for prefix reuse). One generation at a time.
 */
export class Engine {
  readonly manifest: ModelManifest;
  readonly tokenizer: TextTokenizer;
  readonly maxContext: number;
  readonly rope: RopeCache;
  readonly kv: KvCache;
  private readonly backend: DecoderBackend;
  private readonly backendNote: string | null;
  private readonly importNote: string | null;
  private readonly adapter: string | null;
  private readonly prefillChunk: number;
  private readonly bundleDir: string;
  private readonly weightsInfo: ModelWeightsInfo;
  private readonly memoryFacts: LoadMemoryFacts | undefined;
  /** How the chat template writes tool calls, read once from its text (tool-format.ts). */
  private readonly toolFormat: ToolFormat | null;
  /** The sampler's [V] work buffers, lent to every generation (none allocates its own). */
  private readonly samplerScratch: SamplerScratch;
  /** Token ids whose keys/values are in the KV cache, in order (length == kv.length). */
  private cachedTokens: number[] = [];
  /** The model's reasoning markers (null: it does not reason; replies are all content). */
  readonly reasoningMarkers: ReasoningMarkers | null;
  /** decodeStep's input [1], reused so a warm step allocates nothing here. */
  private readonly oneToken = [0];
  private busy = false;
  /** KV caches of earlier sequences (cache/kv-keep.ts). */
  private readonly kept: KeptKvCaches;

  /**
   * Builds an engine on an opened backend (`Engine.load` opens one; tests pass a stand-in).
   * @throws InvalidOptionError for a bad maxContext or prefillChunk, quoting it.
   */
  constructor(parts: EngineParts, opts: Pick<EngineOptions, 'maxContext' | 'prefillChunk' | 'kvCacheBudgetBytes' | 'kvWindowSlack'> = {}) {
    if (opts.maxContext !== undefined) validateMaxContext(opts.maxContext);
    this.kept = new KeptKvCaches(opts.kvCacheBudgetBytes ?? DEFAULT_KV_CACHE_BUDGET_BYTES);
    if (opts.prefillChunk !== undefined && !(Number.isInteger(opts.prefillChunk) && opts.prefillChunk >= 1)) {
      throw new InvalidOptionError('prefill chunk', `${opts.prefillChunk} is not a positive integer`);
    }
    const c = parts.manifest.config;
    this.manifest = parts.manifest;
    this.tokenizer = parts.tokenizer;
    this.backend = parts.backend;
    this.backendNote = parts.backendNote ?? null;
    this.importNote = parts.importNote ?? null;
    this.adapter = parts.adapter ?? null;
    this.bundleDir = parts.bundleDir;
    this.weightsInfo = parts.weights ?? { formats: '', bundleBytes: 0, residentBytes: 0 };
    this.memoryFacts = parts.memory;
    this.toolFormat = detectToolFormat(parts.tokenizer.chatTemplate);
    this.maxContext = opts.maxContext ?? c.trainedContext;
    this.prefillChunk = opts.prefillChunk ?? 256;
    this.rope = new RopeCache(c.rope, this.maxContext, c.localRope);
    this.kv = new KvCache({
      numLayers: c.numLayers,
      numKvHeads: c.numKvHeads,
      headDim: c.headDim,
      maxContext: this.maxContext,
      hostBuffers: this.backend.kvOnHost,
      dtype: parts.kvDtype ?? manifestKvDtype(parts.manifest),
      // Sliding-window layers keep only their window (cache/kv-window.ts), where the graph allows.
      window: this.backend.windowedKv ? windowGroup(c.slidingWindow, this.maxContext, opts.kvWindowSlack) : null,
    });
    this.samplerScratch = new SamplerScratch(c.vocabSize);
    this.reasoningMarkers = reasoningMarkers(this.tokenizer);
  }

  /**
   * Resolves (imports if needed), loads and opens a model.
   * @param source llama2.c checkpoint, Hugging Face folder, GGUF file or bundle.
   * @throws TemplateError / TemplateLimitError when the chat template fails a test conversation,
   *   ModelLoadError (also when the weights and the KV cache at the max context would not
   *   fit in the available memory: `checkMemory`), TokenizerError, InvalidOptionError.
   */
  static load(source: string, opts: EngineOptions = {}): Promise<Engine> {
    return Engine.open(source, opts, null);
  }

  /**
   * `load`, with `gpuNote` saying why a GPU provider was left (then opts ask for the CPU). A GPU
   * provider that opens but cannot run the model at the warm-up (a kernel's own limits, e.g.
   * WebGPU's GatherBlockQuantized once refused Q4_0) is left for the CPU, with its reason in the note.
   */
  private static async open(source: string, opts: EngineOptions, gpuNote: string | null): Promise<Engine> {
    if (opts.maxContext !== undefined) validateMaxContext(opts.maxContext);
    if (opts.threads !== undefined) validateThreads(opts.threads);
    if (opts.kvCacheDtype !== undefined) validateKvDtype(opts.kvCacheDtype);
    if (opts.backend !== undefined && opts.backend !== 'native' && opts.backend !== 'js') {
      throw new InvalidOptionError('backend', `expected native or js, got ${String(opts.backend)}`);
    }
    // The provider first: each has its own graph, so the bundle is resolved for it.
    const provider = await chooseExecutionProvider(parseExecutionProvider(opts.executionProvider ?? 'cpu'), opts.providerProbe);
    // The native backend's CPU graph runs the addon's own quantized matmuls (graph-target.ts).
    const target = engineGraphTarget(provider.ep, opts.graphDtype, opts.backend !== 'js' && opts.nativeKernels !== false && nativeKernelsAvailable());
    const bundle = await resolveModel(source, opts.cacheDir, opts.onProgress, { quantize: opts.quantize, signal: opts.signal, target });
    const m = bundle.manifest;
    if (m.chatTemplate !== null) prestartTemplateSandbox(); // boots while the tokenizer is read
    const maxContext = opts.maxContext ?? m.config.trainedContext;
    // The KV cache setting picks the bundle's graph: its own, or the float16-KV one beside it (CPU float32 bundles).
    const kv = kvGraph(bundle, target.ep === 'cpu' ? (opts.kvCacheDtype ?? DEFAULT_KV_CACHE_DTYPE) : null);
    const estimate = await estimateMemory(m, bundle.dir, maxContext, kv.dtype);
    const available = opts.availableMemoryBytes ?? availableMemory();
    checkMemory(estimate, maxContext, available, bundle.dir, weightsQuantized(m.weights), kv.dtype === 'float32' && m.kvGraphs?.float16 !== undefined);
    // Both caches grow linearly with the max context (the sliding-window layers' KV up to its
    // bound), so one position's bytes judge any other.
    const windowBytes = estimate.window ? estimate.window.bytesPerPosition * Math.min(maxContext, estimate.window.rows) : 0;
    const memory: LoadMemoryFacts = {
      weightBytes: estimate.weightBytes,
      kvBytesPerPosition: (estimate.kvCacheBytes - windowBytes) / maxContext,
      ...(estimate.window ? { windowKvBytesPerPosition: estimate.window.bytesPerPosition, windowRows: estimate.window.rows } : {}),
      ropeBytesPerPosition: estimate.ropeCacheBytes / maxContext,
      availableBytes: available,
    };
    const weights: ModelWeightsInfo = {
      formats: Object.entries(m.weights?.counts ?? { float32: 0 }).sort().map(([f, n]) => `${f} ×${n}`).join(', '),
      bundleBytes: await bundleBytes(bundle.dir),
      residentBytes: estimate.weightBytes,
    };
    const tokenizer = TextTokenizer.fromJson(bundle.tokenizerJson, bundle.tokenizerConfig, {
      bos: m.specialTokens.bos,
      eos: m.specialTokens.eos,
      addBos: m.addBos,
      modelVocabSize: m.config.vocabSize,
      file: bundle.dir,
      exactVocab: m.source.kind === 'llama2c',
      chatTemplate: m.chatTemplate,
    });
    if (m.chatTemplate !== null) probeChatTemplate((msgs) => tokenizer.renderChat(msgs), templateOrigin(m.source));
    // Quantized weights are read in place by the addon's ops: those are read into memory (2 MiB pages).
    const opened = await openDecoderBackend(kv.modelPath, m.config, opts.backend, provider.ep, kv.dtype, opts.threads ?? 0, { weightsInMemory: weightsQuantized(m.weights) });
    if (opened.backend.info.executionProvider !== target.ep && opts.graphDtype === undefined) {
      // The provider was probed but this session fell back to the CPU: the CPU graph, not the GPU's, runs there.
      const why = oneLine(gpuNote, provider.note, opened.note, opened.backend.info.fallbackReason);
      await opened.backend.dispose();
      return Engine.open(source, { ...opts, executionProvider: 'cpu' }, why);
    }
    const adapter = opened.backend.info.executionProvider === provider.ep ? provider.adapter : null;
    try {
      const backendNote = oneLine(gpuNote, provider.note, opened.note, kv.note);
      const engine = new Engine({ manifest: m, tokenizer, backend: opened.backend, bundleDir: bundle.dir, backendNote, importNote: bundle.note, weights, adapter, memory, kvDtype: kv.dtype }, opts);
      await engine.warmUp();
      return engine;
    } catch (e) {
      const ep = opened.backend.info.executionProvider;
      await opened.backend.dispose();
      if (!(e instanceof SessionRunError) || ep === 'cpu') throw e;
      const why = e.message.replace(/^ONNX Runtime run failed: /, '').replace(/ \(inputs: .*\)$/, '');
      return Engine.open(source, { ...opts, executionProvider: 'cpu' }, `${ep === 'cuda' ? 'CUDA' : 'WebGPU'} cannot run this model (${why}); using CPU`);
    }
  }

  /**
   * Runs one token (BOS, else id 0) at position 0 and forgets it, so that the backend's first,
   * profiled run (model/placement.ts) happens at load: `nodesOnCpu` is known before the first
   * answer, whose TTFT then holds no one-time setup (WebGPU compiles its shaders on first use).
   * @throws SessionRunError when the backend cannot run the model.
   */
  async warmUp(): Promise<void> {
    await this.prefill([this.manifest.specialTokens.bos ?? 0]);
    this.reset();
  }

  /** The backend and execution provider in use, and why they differ from the request (one line). */
  get sessionInfo(): SessionInfo {
    const b = this.backend.info;
    return { backend: b.backend, executionProvider: b.executionProvider, fallbackReason: oneLine(this.backendNote, b.fallbackReason), nodesOnCpu: b.nodesOnCpu };
  }

  get info(): ModelInfo {
    const c = this.manifest.config;
    const s = this.sessionInfo;
    return {
      name: this.manifest.name,
      architecture: c.architecture,
      trainedContext: c.trainedContext,
      maxContext: this.maxContext,
      vocabSize: c.vocabSize,
      backend: s.backend,
      executionProvider: s.executionProvider,
      nodesOnCpu: s.nodesOnCpu,
      adapter: this.adapter,
      fallbackReason: oneLine(this.importNote, s.fallbackReason),
      hasChatTemplate: this.manifest.chatTemplate !== null,
      thinkingToggle: this.tokenizer.chatTemplate?.includes('enable_thinking') ?? false,
      toolFormat: this.toolFormat,
      bundleDir: this.bundleDir,
      weights: this.weightsInfo,
      kvCacheDtype: this.kv.dtype,
      ...(this.memoryFacts ? { memory: this.memoryFacts } : {}),
    };
  }

  /**
   * The prompt's token ids as the model will see them (chat template applied, BOS added).
   * With `maxTokens`, a prompt far over it is refused after counting only part of it.
   * @throws ContextOverflowError (past `maxTokens`), InvalidOptionError for an empty prompt or a request with neither/both prompt forms.
   */
  encodeRequest(req: Pick<GenerationRequest, 'prompt' | 'messages' | 'enableThinking' | 'reasoningEffort' | 'tools' | 'replyPrefix' | 'replyReasoning'>, maxTokens?: number): number[] {
    if ((req.prompt === undefined) === (req.messages === undefined)) {
      throw new InvalidOptionError('request', 'give exactly one of prompt and messages');
    }
    if (req.prompt !== undefined) {
      if (req.prompt.length === 0) throw new InvalidOptionError('prompt', 'the prompt is empty');
      // Raw user text never becomes special tokens (llama2.c run.c keeps a literal "<s>" as text).
      return this.tokenizer.encode(req.prompt, { addBos: this.manifest.addBos, parseSpecial: false, maxTokens });
    }
    if (req.messages!.every((m) => m.content.length === 0)) throw new InvalidOptionError('prompt', 'the prompt is empty');
    // The chat template (or, without one, the transcript) as the model will see it.
    const opening = this.replyOpening(req);
    const think = { enableThinking: req.enableThinking, reasoningEffort: req.reasoningEffort };
    if (!req.tools?.length && !opening) return this.tokenizer.encodeChat(req.messages!, { maxTokens, ...think });
    if (req.tools?.length && !this.tokenizer.chatTemplate?.includes('tools')) throw new InvalidOptionError('tools', "this model's chat template does not take tools");
    const text = this.tokenizer.renderChat(req.messages!, { ...think, ...(req.tools?.length ? { extra: { tools: req.tools } } : {}) }) + opening;
    // As encodeChat: a template's special tokens are parsed; a transcript (no template) is plain text.
    return this.tokenizer.encode(text, { maxTokens, parseSpecial: this.tokenizer.chatTemplate !== null });
  }

  /** The text a reply opens with: its reasoning inside the markers (see `replyReasoning`), then `replyPrefix`. */
  private replyOpening(req: Pick<GenerationRequest, 'replyPrefix' | 'replyReasoning'>): string {
    const m = this.reasoningMarkers;
    const prefix = req.replyPrefix ?? '';
    if (!m || !req.replyReasoning) return prefix;
    return writtenReply(m, req.replyReasoning, prefix);
  }

  /** Forgets the KV cache contents (keeps its buffers) and the kept KV caches of earlier sequences. */
  reset(): void {
    this.kv.reset();
    this.cachedTokens = [];
    this.kept.clear();
  }

  /** Kept KV caches of earlier sequences: how many, and their bytes (≤ the budget). */
  get savedKvStats(): { entries: number; bytes: number; budgetBytes: number } {
    return this.kept.stats;
  }

  /**
   * Runs `tokenIds` at the next positions P … P+T−1 (P = tokens held): both caches are ensured
   * first (a typed overflow error before any tensor is touched), the whole RoPE cache goes to the
   * backend (the same object until it grows; the graph gathers the rows), the KV rows are
   * committed after the run. The caller chunks long prompts. `reserveNext` (a prompt's last
   * chunk): the caches also make room for position P+T, where the token sampled from these logits
   * goes next, when the max context has it, so a prompt that ends at a capacity (1,024 tokens
   * into 1,024) grows here, where the growth is due anyway, and not again at the first decode
   * step (a copy of every held row: 0.4 s at 1,024 positions of Qwen3-0.6B's shapes on a 2-core VM).
   * @returns logits float32 [V] of the last token (the backend's reused buffer).
   * @throws ContextOverflowError past the max context; SessionRunError when the backend fails
   *   (the KV cache then still holds P tokens).
   */
  async prefill(tokenIds: readonly number[], reserveNext = false): Promise<Float32Array> {
    const P = this.kv.length;
    const end = P + tokenIds.length;
    const room = reserveNext && end < this.maxContext ? end + 1 : end;
    this.rope.ensure(room);
    this.kv.ensure(room);
    const logits = await this.backend.run(tokenIds, this.rope.tables, this.kv);
    this.kv.commit(tokenIds.length);
    for (const t of tokenIds) this.cachedTokens.push(t);
    return logits;
  }

  /** Feeds one sampled token back at the next position: `prefill([tokenId])` without allocating its input. */
  decodeStep(tokenId: number): Promise<Float32Array> {
    this.oneToken[0] = tokenId;
    return this.prefill(this.oneToken);
  }

  /**
   * Generates a completion. See the file comment for the event sequence.
   * @throws InvalidOptionError (bad request, engine busy), ContextOverflowError (prompt longer
   *   than the max context), both before any event. Failures during the run end with
   *   done{reason:'error'}.
   */
  async *generate(req: GenerationRequest, opts: { signal?: AbortSignal } = {}): AsyncGenerator<GenerationEvent> {
    const gen = this.begin(req);
    const signal = opts.signal;
    try {
      // 1. prefix reuse: the best of the live and the kept KV caches, then its longest common
      // prefix, but always prefill ≥ 1 token for logits.
      if (req.kvCacheBudgetBytes !== undefined) this.setKvCacheBudget(req.kvCacheBudgetBytes);
      const reused = (gen.reusedTokens = this.reuse(gen.prompt, this.switchTo(gen.prompt)));
      // 2. chunked prefill, the KV cache grown once for the whole prompt (and the first token's
      // position), not once per chunk
      let logits: Float32Array | null = null;
      const prefillStart = performance.now();
      this.kv.reserve(Math.min(gen.prompt.length + 1, this.maxContext));
      for (let i = reused; i < gen.prompt.length && !this.cancelled(gen, signal); i += this.prefillChunk) {
        const chunk = gen.prompt.slice(i, i + this.prefillChunk);
        logits = await this.prefill(chunk, i + chunk.length >= gen.prompt.length);
        gen.prefilledTokens += chunk.length;
        yield { type: 'prefill', processed: i + chunk.length - reused, total: gen.prompt.length - reused };
      }
      gen.prefillMs = performance.now() - prefillStart;
      // 3. decode: sample, accept (EOS, stop strings, max tokens), check room and abort, step.
      // The max context bounds prompt + generated positions: a token is sampled only if it has a
      // position (< maxContext), so usage never counts more than the max context. Out of room,
      // the request either ends ('context-full') or shifts the context (`makeRoom`).
      // Only a prompt that fills the context leaves no room for the first token (checked once
      // here); after that each step below keeps a free position, shifting before it would not.
      gen.decodeStartedAt = performance.now();
      if (logits && this.kv.length >= this.maxContext) this.makeRoom(gen);
      while (logits && !gen.finished) {
        const token = gen.sampler.sample(logits, this.cachedTokens, gen.constraint?.mask(logits.length));
        const logprob = gen.topLogprobs === null ? undefined : tokenLogprob(logits, token, gen.topLogprobs, this.tokenizer);
        const deltas = gen.accept(token, logprob);
        if (deltas !== null) yield* tokenEvents(token, deltas, gen.part, logprob);
        if (gen.finished) break;
        if (this.kv.length + 1 >= this.maxContext && !this.makeRoom(gen)) break;
        if (!this.cancelled(gen, signal)) logits = await this.decodeStep(token);
      }
      // 4. what the stream decoder still holds
      for (const d of gen.flush()) yield { type: 'token', id: -1, text: d.text, part: d.part };
    } catch (e) {
      // A failed run may have left partial rows past kv.length; they are ignored (length unchanged).
      gen.fail(e);
    } finally {
      this.busy = false;
    }
    yield this.done(gen);
  }

  /**
   * Out of positions: with `contextShift` requested, shifts the context (the kept prefix — the
   * system prompt, or with 'first-exchange' everything before the second user turn — stays,
   * the oldest turns after it leave the KV cache, the rest's keys are rotated by the shift) and
   * returns true; otherwise (or when nothing can be dropped) ends `gen` with 'context-full'.
   * The RoPE cache is untouched: the kept tokens now sit at positions it already has.
   */
  private makeRoom(gen: Generation): boolean {
    const c = this.manifest.config;
    const plan = gen.shifter?.next(this.kv.length, (keep, drop) => this.kv.exactDrop(keep, drop)) ?? null;
    if (!plan) {
      gen.finish('context-full');
      return false;
    }
    // With a local RoPE (Gemma 3) the rotation holds the global angles, then the local ones, and
    // each sliding layer turns by the second.
    const { cos, sin } = this.rope.shiftRotation(plan.drop);
    const layerTables = c.localRope ? Uint8Array.from({ length: c.numLayers }, (_, l) => ((c.slidingWindow?.[l] ?? 0) > 0 ? 1 : 0)) : undefined;
    this.backend.shift(this.kv, plan.keep, plan.drop, { cos, sin, rotaryDim: c.rope.rotaryDim, interleaved: c.rope.layout === 'interleaved', layerTables });
    this.cachedTokens.splice(plan.keep, plan.drop);
    return true;
  }

  /** Validates a request and claims the engine. @throws see `generate`. */
  private begin(req: GenerationRequest): Generation {
    if (!Number.isInteger(req.maxTokens) || req.maxTokens < 1) {
      throw new InvalidOptionError('max tokens', `${req.maxTokens} is not a positive integer`);
    }
    if (req.contextShift !== undefined && req.contextShift !== true && req.contextShift !== false && req.contextShift !== 'first-exchange') {
      throw new InvalidOptionError('context shift', `${JSON.stringify(req.contextShift)} is not true, false or "first-exchange"`);
    }
    const sampler = new Sampler(validateSamplerOptions(req.sampler), this.samplerScratch);
    const prompt = this.encodeRequest(req, this.maxContext);
    if (prompt.length > this.maxContext) throw new ContextOverflowError(prompt.length, this.maxContext, 'the prompt');
    if (this.busy) throw new InvalidOptionError('request', 'the engine is already generating');
    this.busy = true;
    const shifter = req.contextShift ? new ContextShifter(this.tokenizer, prompt, req.messages ?? null, req.contextShift === 'first-exchange' ? 'first-exchange' : 'system') : null;
    return new Generation(req, prompt, sampler, this.tokenizer, shifter, this.replyReasoning(req, prompt));
  }

  /**
   * How a chat reply of this model reasons: its markers, and whether the prompt (its last
   * tokens, special ones spelled out) already opened the block. Null for a raw prompt or a
   * model without markers: the reply is all content.
   */
  private replyReasoning(req: GenerationRequest, prompt: number[]): { markers: ReasoningMarkers; openInPrompt: boolean; midway?: boolean } | null {
    const markers = this.reasoningMarkers;
    if (!markers || req.messages === undefined) return null;
    // A continued reply still inside its reasoning (`replyReasoning`, no `replyPrefix`) goes on reasoning.
    if (req.replyReasoning && !req.replyPrefix) return { markers, openInPrompt: true, midway: true };
    const tail = this.tokenizer.decode(prompt.slice(-REASONING_TAIL_TOKENS), { skipSpecial: false });
    return { markers, openInPrompt: promptOpensReasoning(tail, markers) };
  }

  /**
   * Memory for kept KV caches of earlier sequences, bytes; the least recently used go first
   * until they fit. @throws InvalidOptionError for a value that is not a non-negative integer.
   */
  setKvCacheBudget(bytes: number): void {
    this.kept.setBudget(bytes);
  }

  /**
   * Before `prompt` is prefilled: keeps the live KV cache when `prompt` would overwrite most of
   * it (or a kept one serves `prompt` better), and copies back the kept one that shares the
   * longest prefix with `prompt`, when it beats the live cache.
   * @returns the length of the prefix the (now) live KV cache shares with `prompt`.
   */
  private switchTo(prompt: readonly number[]): number {
    const live = commonPrefix(this.cachedTokens, prompt);
    // Taken out first, so keeping the live one cannot evict it.
    const chosen = this.kept.take(prompt, live);
    if ((chosen || live * 2 < this.cachedTokens.length) && this.cachedTokens.length > 0) {
      const windowStart = this.kv.windowStart;
      this.kept.keep(this.cachedTokens, this.kv.snapshotFloats(this.kv.length, windowStart) * 4, () => this.backend.saveKv(this.kv), windowStart);
    }
    if (!chosen) return live;
    this.kv.ensureHeld(chosen.kept.tokens.length, chosen.kept.windowStart);
    this.backend.restoreKv(this.kv, chosen.kept.data, chosen.kept.tokens.length, chosen.kept.windowStart);
    this.cachedTokens = chosen.kept.tokens;
    return chosen.shared;
  }

  /**
   * Rewinds the KV cache to the longest prefix it shares with `prompt`, `common` positions
   * (switchTo's result), but < prompt.length, and that the sliding-window layers still hold
   * (`KvCache.reusable`: else 0, a full prefill).
   */
  private reuse(prompt: readonly number[], common: number): number {
    let reused = common;
    if (reused === prompt.length) reused--;
    reused = this.kv.reusable(reused);
    this.kv.rewindTo(reused);
    this.cachedTokens.length = reused;
    return reused;
  }

  /** Ends `gen` with 'cancelled' when the signal fired; says whether it has ended. */
  private cancelled(gen: Generation, signal: AbortSignal | undefined): boolean {
    if (signal?.aborted) gen.finish('cancelled');
    return gen.finished;
  }

  /** The final event: reason, text, token ids and stats. */
  private done(gen: Generation): GenerationEvent {
    const n = gen.tokens.length;
    const decodeMs = gen.decodeStartedAt ? performance.now() - gen.decodeStartedAt : 0;
    const stats: GenerationStats = {
      backend: this.backend.info.backend,
      promptTokens: gen.prompt.length,
      generatedTokens: n,
      executionProvider: this.backend.info.executionProvider,
      nodesOnCpu: this.backend.info.nodesOnCpu,
      reasoningTokens: gen.reasoningTokens,
      reasoningMs: gen.reasoningEndedAt && gen.decodeStartedAt ? round(gen.reasoningEndedAt - gen.decodeStartedAt) : 0,
      reusedTokens: gen.reusedTokens,
      prefilledTokens: gen.prefilledTokens,
      ttftMs: round(gen.ttftMs),
      prefillTokensPerSec: gen.prefillMs > 0 ? round((gen.prefilledTokens * 1000) / gen.prefillMs) : 0,
      decodeTokensPerSec: decodeMs > 0 && n > 1 ? round(((n - 1) * 1000) / decodeMs) : 0,
      contextUsed: this.kv.length,
      contextShifts: gen.shifter?.shifts ?? 0,
      droppedTokens: gen.shifter?.dropped ?? 0,
      maxContext: this.maxContext,
      rope: pick(this.rope.stats, ['capacity', 'rowsComputed', 'growths', 'bytes']),
      kv: pick(this.kv.stats, ['capacity', 'growths', 'bytes']),
    };
    const reason = gen.reason ?? 'length';
    return { type: 'done', reason, text: gen.text, reasoning: gen.reasoning, promptTokens: gen.prompt, tokens: gen.tokens, ...(gen.topLogprobs !== null ? { logprobs: gen.logprobs } : {}), stats, ...(gen.error ? { error: gen.error } : {}) };
  }

  /** Releases the backend. */
  async dispose(): Promise<void> {
    await this.backend.dispose();
  }
}

/** Prompt tokens read for an opening marker at its end (Qwen3's `<think>\n\n</think>\n\n` is 4). */
const REASONING_TAIL_TOKENS = 8;

/**
 * The events of one accepted token: one per part its text falls in (the token's id on the first,
 * −1 on a second, so tokens are counted once), or one empty delta in the current part while its
 * text is held back (consumers count tokens by these).
 */
function* tokenEvents(id: number, deltas: PartDelta[], part: ReplyPart, logprob?: TokenLogprob): Generator<GenerationEvent> {
  const lp = logprob ? { logprob } : {};
  if (deltas.length === 0) yield { type: 'token', id, text: '', part, ...lp };
  for (let i = 0; i < deltas.length; i++) yield { type: 'token', id: i === 0 ? id : -1, text: deltas[i]!.text, part: deltas[i]!.part, ...(i === 0 ? lp : {}) };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

function pick<T extends object, K extends keyof T>(o: T, keys: K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const k of keys) out[k] = o[k];
  return out;
}
